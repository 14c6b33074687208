package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/internal/web/webtest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// TestMain runs the package's tests, then removes what they shared: the alfred binary built
// once (servetest.Binary), the images built once (scriptImage, agenttest.BuildImageOnce) and
// the Chromium the page tests shared (webtest.NewBrowser).
func TestMain(m *testing.M) {
	code := m.Run()
	webtest.Close()
	runtimetest.RemoveImagesBuiltOnce()
	servetest.RemoveBinary()
	os.Exit(code)
}

// e2eWait is the most one step of an end-to-end test may take (a status to come, a container
// to start, a server to answer): a bound for a hang, not a measure of speed. Beside the other
// parallel tests and a CPU hog on a loaded 2-core machine, one phase's container run took over
// 90 s.
const e2eWait = 5 * time.Minute

// scriptImage returns a tag of the test's own on the script agent's image, which is built once
// for the package (runtimetest.BuildImageOnce); the tag is removed when the test ends.
func scriptImage(tb testing.TB) string {
	tb.Helper()
	cli := runtimetest.Client(tb)
	return runtimetest.BuildImageOnce(tb, context.Background(), cli, "alfred-e2e-script:"+strings.ToLower(uuid.NewString()[:8]), "../alfred-script-agent")
}
