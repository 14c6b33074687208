package webtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// Browser is Debian's headless Chromium (package chromium; scripts/dev-deps.sh installs it).
// Load's pages share one process for the whole test binary, each in a tab and a browser
// context of its own (cookies, storage and cache not shared), so a page is loaded without
// paying for a browser start; that process is started by the first NewBrowser and stopped by
// Close, or killed with the test binary (chromedp sets the parent-death signal). A Tab has a
// browser of its own.
type Browser struct {
	bin string
	// ScreenshotDir is where Load and Tab.Screenshot save screenshots; the test's temporary
	// directory unless ALFRED_SCREENSHOT_DIR names another.
	ScreenshotDir string
}

// shared is the test binary's one Chromium process.
var shared struct {
	mu      sync.Mutex
	ctx     context.Context // the browser's first tab: new tabs are created from it
	cancel  func()
	profile string
}

// NewBrowser finds chromium on PATH and starts the shared process if it is not running. Without
// chromium the test is skipped with a loud message, or fails when CI is set.
func NewBrowser(t testing.TB) *Browser {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		msg := "NO CHROMIUM: the page tests need headless Chromium (apt-get install -y chromium, or scripts/dev-deps.sh)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED: " + msg)
	}
	if err := start(bin); err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("ALFRED_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &Browser{bin: bin, ScreenshotDir: dir}
}

// start starts the shared Chromium once; a start that failed is tried again by the next test.
func start(bin string) error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.ctx != nil {
		return nil
	}
	profile, err := os.MkdirTemp("", "alfred-webtest-chromium-")
	if err != nil {
		return err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.UserDataDir(profile), chromedp.Flag("hide-scrollbars", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, outside any timeout
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
		return fmt.Errorf("start chromium: %w", err)
	}
	shared.ctx, shared.profile = ctx, profile
	shared.cancel = func() { cancel(); cancelAlloc() }
	return nil
}

// Close stops the shared Chromium and removes its profile; a TestMain calls it after m.Run.
// Without a running browser it does nothing.
func Close() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.ctx == nil {
		return
	}
	shared.cancel()
	_ = os.RemoveAll(shared.profile)
	shared.ctx, shared.cancel, shared.profile = nil, nil, ""
}

// newTab opens a tab of the shared browser in a browser context of its own, 1280×900; it
// closes when the test ends.
func newTab(t testing.TB) context.Context {
	t.Helper()
	shared.mu.Lock()
	parent := shared.ctx
	shared.mu.Unlock()
	if parent == nil {
		t.Fatal("webtest: the shared Chromium is not running (NewBrowser starts it)")
	}
	ctx, cancel := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatalf("chromium new tab: %v", err)
	}
	return ctx
}

// Page is what Load saw.
type Page struct {
	// DOM is the serialised DOM after load.
	DOM string
	// Screenshot is the path of the PNG.
	Screenshot string
}

// Load opens url in a fresh tab (a browser context of its own: no cookies), returns the DOM
// after the load event and saves a 1280×900 screenshot of the viewport as name+".png" in
// ScreenshotDir.
func (b *Browser) Load(t testing.TB, url, name string) Page {
	t.Helper()
	tab := &Tab{b: b, ctx: newTab(t)}
	tab.Open(t, url)
	dom := tab.DOM(t)
	shot := filepath.Join(b.ScreenshotDir, name+".png")
	png := tab.capture(t, chromedp.CaptureScreenshot())
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of %s: %s", url, shot)
	return Page{DOM: dom, Screenshot: shot}
}
