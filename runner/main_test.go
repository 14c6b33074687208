package runner_test

import (
	"os"
	"testing"

	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// TestMain runs the package's tests, then removes the images they shared
// (runtimetest.BuildImageOnce).
func TestMain(m *testing.M) {
	code := m.Run()
	runtimetest.RemoveImagesBuiltOnce()
	os.Exit(code)
}
