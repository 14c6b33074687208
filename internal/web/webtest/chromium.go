package webtest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Browser is Debian's headless Chromium (package chromium; scripts/dev-deps.sh installs it).
type Browser struct {
	bin string
	// ScreenshotDir is where Load saves screenshots; the test's temporary directory unless
	// ALFRED_SCREENSHOT_DIR names another.
	ScreenshotDir string
}

// NewBrowser finds chromium on PATH. Without it the test is skipped with a loud message, or
// fails when CI is set.
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
	dir := os.Getenv("ALFRED_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &Browser{bin: bin, ScreenshotDir: dir}
}

// Page is what Load saw.
type Page struct {
	// DOM is the serialised DOM after load (chromium --dump-dom).
	DOM string
	// Screenshot is the path of the PNG.
	Screenshot string
}

// Load opens url in a fresh headless Chromium, returns the DOM and saves a 1280×900
// screenshot as name+".png" in ScreenshotDir. Each call uses its own profile directory.
func (b *Browser) Load(t testing.TB, url, name string) Page {
	t.Helper()
	shot := filepath.Join(b.ScreenshotDir, name+".png")
	dom := b.run(t, url, "--dump-dom")
	b.run(t, url, "--screenshot="+shot, "--window-size=1280,900", "--hide-scrollbars")
	if _, err := os.Stat(shot); err != nil {
		t.Fatalf("chromium saved no screenshot of %s: %v", url, err)
	}
	t.Logf("screenshot of %s: %s", url, shot)
	return Page{DOM: dom, Screenshot: shot}
}

func (b *Browser) run(t testing.TB, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	full := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--disable-extensions", "--user-data-dir=" + t.TempDir(),
	}, args...)
	cmd := exec.CommandContext(ctx, b.bin, append(full, url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v %s: %v\n%s", args, url, err, errb.String())
	}
	return out.String()
}
