package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/web/webtest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// TestMain runs the package's tests, then removes what they shared: the alfred binary
// buildAlfred built once, the images built once (scriptImage, agenttest.BuildImageOnce) and
// the Chromium the page tests shared (webtest.NewBrowser).
func TestMain(m *testing.M) {
	code := m.Run()
	webtest.Close()
	runtimetest.RemoveImagesBuiltOnce()
	if alfredBin.dir != "" {
		_ = os.RemoveAll(alfredBin.dir)
	}
	os.Exit(code)
}

// e2eWait is the most one step of an end-to-end test may take (a status to come, a container
// to start, a server to answer): a bound for a hang, not a measure of speed. Beside the other
// parallel tests and a CPU hog on a loaded 2-core machine, one phase's container run took over
// 90 s.
const e2eWait = 5 * time.Minute

// alfredBin is this package's binary, built once for every test that runs it.
var alfredBin struct {
	once sync.Once
	dir  string
	path string
	out  []byte
	err  error
}

// buildAlfred returns the path of this package's binary, `alfred`, for the tests that run it
// as an operator would (start, SIGKILL, start again). It is built once per test process, on
// the first call, and shared: no test writes to it. dir is not used (the binary was built into
// it once per test).
func buildAlfred(t testing.TB, _ string) string {
	t.Helper()
	alfredBin.once.Do(func() {
		alfredBin.dir, alfredBin.err = os.MkdirTemp("", "alfred-bin-")
		if alfredBin.err != nil {
			return
		}
		alfredBin.path = filepath.Join(alfredBin.dir, "alfred")
		alfredBin.out, alfredBin.err = exec.Command("go", "build", "-o", alfredBin.path, ".").CombinedOutput()
	})
	require.NoError(t, alfredBin.err, "%s", alfredBin.out)
	return alfredBin.path
}

// scriptImage returns a tag of the test's own on the script agent's image, which is built once
// for the package (runtimetest.BuildImageOnce); the tag is removed when the test ends.
func scriptImage(tb testing.TB) string {
	tb.Helper()
	cli := runtimetest.Client(tb)
	return runtimetest.BuildImageOnce(tb, context.Background(), cli, "alfred-e2e-script:"+strings.ToLower(uuid.NewString()[:8]), "../alfred-script-agent")
}
