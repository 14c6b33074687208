package webtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// Tab is one headless Chromium tab driven over the DevTools protocol (chromedp): it keeps its
// cookies between pages, so a test can sign in, follow links and submit the pages' forms as
// an operator's browser does.
type Tab struct {
	b   *Browser
	ctx context.Context
}

// Tab starts a Chromium of its own (its own profile directory) with one tab; it stops when the
// test ends. Unlike Load's pages, a Tab does not share the test binary's browser: clicks and
// form submissions on self-reloading pages in a browser shared by parallel tests hung for
// minutes on a loaded machine, which they never did in a browser of their own.
func (b *Browser) Tab(t testing.TB) *Tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(b.bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser, outside any timeout
		t.Fatalf("start chromium: %v", err)
	}
	return &Tab{b: b, ctx: ctx}
}

// bound is the most one step may take: a bound for a stuck browser, not a measure of speed.
// A full-page screenshot took over 90 s with two CPU hogs beside the parallel end-to-end
// tests on a loaded 2-core machine, so the bound leaves room for such a machine.
const bound = 5 * time.Minute

// Open loads url and returns the document's answer. Leaving a self-reloading page (a running
// run's), the page's own reload can start as the load does and abort it ("page load error
// net::ERR_ABORTED", seen under load): Open is a GET, so it is tried again, until bound.
//
// The page left may also reload itself as the load starts and win: the answer is then the old
// page's, and the tab is still where it was. Open checks where the tab is after the load, and
// loads url again when it is still at the page it left (a redirect of url's is followed).
func (tb *Tab) Open(t testing.TB, url string) *network.Response {
	t.Helper()
	again := func(err error) bool {
		return strings.Contains(err.Error(), "net::ERR_ABORTED") || errors.Is(err, errElsewhere)
	}
	return retry(tb, t, "open "+url, again, func(ctx context.Context) (*network.Response, error) {
		before, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			return nil, err
		}
		resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(url))
		if err != nil {
			return nil, err
		}
		at, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			return nil, err
		}
		if at == before && at != url { // the old page's reload, not a redirect of url's
			return nil, fmt.Errorf("%w: the tab is still at %s", errElsewhere, at)
		}
		return resp, nil
	})
}

// errElsewhere is a load that left the tab on another page than the one asked for.
var errElsewhere = errors.New("the load ended on another page")

// SignIn opens the login form at loginURL, types token into it and submits it, as an operator
// does (the token is never accepted in a URL); it fails t unless the page it leads to answers
// 200.
func (tb *Tab) SignIn(t testing.TB, loginURL, token string) {
	t.Helper()
	tb.Open(t, loginURL)
	tb.SetValue(t, `input[name="token"]`, token)
	if resp := tb.Click(t, "form button"); resp == nil || resp.Status != 200 {
		t.Fatalf("sign in at %s: %v", loginURL, resp)
	}
	// The page the login led to, opened again: a settled document, as after Open.
	ctx, cancel := context.WithTimeout(tb.ctx, bound)
	defer cancel()
	at, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatalf("sign in at %s: %v", loginURL, err)
	}
	tb.Open(t, at)
}

// Click clicks the element css selects (a form's button) and returns the answer of the page
// it leads to (after redirects). A self-reloading page can replace its document between the
// query of the element and the click ("Could not find node with given id"): no click was
// sent, and the click is tried again on the new document, until bound.
func (tb *Tab) Click(t testing.TB, css string) *network.Response {
	t.Helper()
	return retry(tb, t, "click "+css, replaced, func(ctx context.Context) (*network.Response, error) {
		return chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(css), chromedp.NodeVisible))
	})
}

// SetValue sets the value attribute of the element css selects (a hidden field), as a page
// an attacker crafted could.
func (tb *Tab) SetValue(t testing.TB, css, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, bound)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.SetAttributeValue(chromedp.CSS(css), "value", value, chromedp.NodeReady)); err != nil {
		t.Fatalf("chromium set %s: %v", css, err)
	}
}

// DOM returns the current document's serialised DOM. A running run's page reloads itself every
// few seconds, and a read by node (query, then serialise) fails when a reload replaces the
// document in between ("No node with given id", "Cannot find context with specified id"),
// which a loaded machine makes likely: such a read is tried again on the new document, until
// bound.
func (tb *Tab) DOM(t testing.TB) string {
	t.Helper()
	return retry(tb, t, "read the DOM", navigated, func(ctx context.Context) (string, error) {
		return chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	})
}

// retry runs step until it succeeds and returns its result, within bound: an error again
// accepts (a navigation, the page's own reload, got in the way; nothing was done) is logged and
// step is tried again on the new document after a short pause; any other error, or bound,
// fails t.
func retry[T any](tb *Tab, t testing.TB, what string, again func(error) bool, step func(context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, bound)
	defer cancel()
	for {
		v, err := step(ctx)
		if err == nil {
			return v
		}
		if !again(err) || ctx.Err() != nil {
			t.Fatalf("chromium %s: %v", what, err)
		}
		t.Logf("chromium %s: %v; trying again on the new document", what, err)
		select {
		case <-ctx.Done():
			t.Fatalf("chromium %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// replaced reports whether err is Chromium's answer to a read of a node or a context that a
// navigation (the page's own reload) replaced.
func replaced(err error) bool {
	msg := err.Error()
	for _, s := range []string{"No node with given id", "Could not find node with given id", "Cannot find context with specified id", "Execution context was destroyed"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// navigated reports whether err is Chromium's answer to a read that a navigation (the page's
// own reload) got in the way of: a node or context it replaced, or the page detached while
// its new document is attached ("Not attached to an active page", a screenshot of a page that
// reloads itself). Reads only: nothing was done, so they are tried again; a click is not.
func navigated(err error) bool {
	return replaced(err) || strings.Contains(err.Error(), "Not attached to an active page")
}

// Screenshot saves the current page as name+".png" in the browser's ScreenshotDir.
func (tb *Tab) Screenshot(t testing.TB, name string) string {
	t.Helper()
	png := tb.capture(t, chromedp.FullScreenshot(100)) // quality 100 is PNG, below it JPEG
	path := filepath.Join(tb.b.ScreenshotDir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// captureAttempt bounds one screenshot attempt. A page that reloads itself (a running run's,
// every 2 s) can replace its document while Chromium waits for the frame to capture, and the
// capture then never answers; on a loaded machine that happened to every capture of such a
// page in a shared browser. An attempt cut at this bound is tried again on the new document.
const captureAttempt = 20 * time.Second

// capture runs the screenshot action shot, each attempt bounded by captureAttempt, until one
// answers or bound passes: an attempt cut at captureAttempt or got in the way of by a
// navigation is tried again on the new document.
func (tb *Tab) capture(t testing.TB, shot chromedp.Action[[]byte]) []byte {
	t.Helper()
	again := func(err error) bool { return errors.Is(err, context.DeadlineExceeded) || navigated(err) }
	return retry(tb, t, "screenshot", again, func(ctx context.Context) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, captureAttempt)
		defer cancel()
		return chromedp.Run(ctx, shot)
	})
}
