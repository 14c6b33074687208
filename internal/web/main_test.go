package web_test

import (
	"os"
	"testing"

	"github.com/alfred-bot/alfred/internal/web/webtest"
)

// TestMain runs the package's tests, then stops the Chromium they shared (webtest.NewBrowser).
func TestMain(m *testing.M) {
	code := m.Run()
	webtest.Close()
	os.Exit(code)
}
