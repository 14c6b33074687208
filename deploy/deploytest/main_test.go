package deploytest

import (
	"os"
	"testing"

	"github.com/alfred-bot/alfred/internal/base/servetest"
)

// TestMain runs the package's tests, then removes the alfred binary they shared
// (servetest.Binary: the doctor's tests run it, the deploy test puts it in Alfred's image).
func TestMain(m *testing.M) {
	code := m.Run()
	servetest.RemoveBinary()
	os.Exit(code)
}
