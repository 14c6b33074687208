package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/internal/web/webtest"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/agent/agenttest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// TestReadyzWhileDraining drains the instance from the pages (signed in, with the form's CSRF
// token, as a browser does) and reads /readyz on the webhook port: 200 "draining" (still ready:
// deliveries are stored) until the drain is stopped, then 200 "ok" again.
func TestReadyzWhileDraining(t *testing.T) {
	t.Parallel()
	e := startE2E(t, time.Hour)
	adminSrv := httptest.NewServer(e.srv.admin)
	t.Cleanup(adminSrv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	read := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	readyz := func() (int, string) { return read(http.Get(e.url + "/readyz")) }
	// Ready once the start-up (the rebuild of an empty store) is done.
	require.Eventually(t, func() bool { code, _ := readyz(); return code == http.StatusOK },
		e2eWait, 50*time.Millisecond, "never ready")
	var body string

	code, page := read(browser.PostForm(adminSrv.URL+web.Prefix+"/login", url.Values{"token": {e2eAdminToken}, "next": {web.Prefix + "/"}}))
	require.Equal(t, http.StatusOK, code)
	token := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	require.Len(t, token, 2, "the list page carries the drain form")
	drain := func(on string) (int, string) {
		return read(browser.PostForm(adminSrv.URL+web.Prefix+"/drain", url.Values{"csrf": {token[1]}, "on": {on}}))
	}
	code, _ = read(browser.PostForm(adminSrv.URL+web.Prefix+"/drain", url.Values{"on": {"1"}}))
	require.Equal(t, http.StatusForbidden, code, "no CSRF token")
	code, _ = readyz()
	require.Equal(t, http.StatusOK, code)

	code, page = drain("1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `id="draining"`)
	require.True(t, e.srv.workers.Draining())
	code, body = readyz()
	require.Equal(t, http.StatusOK, code, "still ready: a drain stops claims, and every delivery is still stored")
	require.Equal(t, "draining", strings.TrimSpace(body))

	code, _ = drain("0")
	require.Equal(t, http.StatusOK, code)
	code, body = readyz()
	require.Equal(t, http.StatusOK, code, body)
}

// cancelScript is a development that only a cancel ends.
const cancelScript = `
development:
  summary: never reached
  commit_message: "never"
  log: ["step 1: thinking for a long time"]
  sleep_seconds: 900
`

// TestCancelRunFromThePages cancels a running development with the run page's button in
// headless Chromium: the container is stopped and removed (the runner's stop path), the issue
// is blocked with one comment saying so, and the run page and the timeline say who cancelled.
func TestCancelRunFromThePages(t *testing.T) {
	t.Parallel()
	cli := runtimetest.Client(t)
	claude := agenttest.BuildImageOnce(t, context.Background(), cli)
	script := scriptImage(t)
	scriptPath := filepath.Join(t.TempDir(), "script.yaml")
	require.NoError(t, os.WriteFile(scriptPath, []byte(cancelScript), 0o644))
	tab := webtest.NewBrowser(t).Tab(t)
	e := startE2EWith(t, storeSQLite, forge.KindForgejo, "acceptance/sandbox", time.Hour, fmt.Sprintf(`
agents:
  - name: claude
    adapter: claude-code
    image: %s
    api_key: sk-test-key-1234567890
  - name: script
    adapter: script
    image: %s
    script: %s
phases:
  default: claude
  development: script
`, claude, script, scriptPath))
	ctx := context.Background()
	adminSrv := httptest.NewServer(e.srv.admin)
	t.Cleanup(adminSrv.Close)

	mb, r := e.toRunningDevelopment(func(r web.RunSummary) bool {
		_, err := cli.ContainerInspect(ctx, r.Container)
		return err == nil
	})
	run, container := r.ID, r.Container

	tab.SignIn(t, adminSrv.URL+web.Prefix+"/login?next="+url.QueryEscape(fmt.Sprintf("%s/runs/%d", web.Prefix, run)), e2eAdminToken)
	resp := tab.Click(t, "#cancel")
	require.EqualValues(t, http.StatusOK, resp.Status)

	e.waitStatus("status::blocked")
	require.Eventually(t, func() bool {
		_, err := cli.ContainerInspect(ctx, container)
		return cerrdefs.IsNotFound(err)
	}, 2*time.Minute, 200*time.Millisecond, "the cancelled run's container is still there")
	told := 0
	for _, c := range e.comments() {
		k, _, _ := mailbox.ParseMarker(c)
		if strings.Contains(c, "an operator cancelled the development run (attempt 1) from Alfred's pages.") &&
			strings.HasPrefix(k, "blocked-") {
			told++
		}
		require.NotContains(t, c, "127.0.0.1", "the operator's address stays on the pages")
	}
	require.Equal(t, 1, told, "the issue is told once (its status comment says it is blocked)")
	e.requireUniqueMarkers()

	tab.Open(t, adminSrv.URL+fmt.Sprintf("%s/mailboxes/%d", web.Prefix, mb.ID))
	dom := tab.DOM(t)
	tab.Screenshot(t, "controls-cancelled-e2e")
	require.Regexp(t, fmt.Sprintf(`operator \(session [0-9a-f]{8}\) from 127\.0\.0\.1 cancelled run %d`, run), dom)
	require.Regexp(t, fmt.Sprintf(`(?s)data-run="%d".*?badge interrupted`, run), dom)
}

// TestPausedProjectFromThePages pauses the project from the pages before its first delivery:
// the assignment is stored, its mailbox (created paused) is not claimed and the issue hears
// nothing; resuming wakes the workers and the assignment is acknowledged once.
func TestPausedProjectFromThePages(t *testing.T) {
	t.Parallel()
	e := startE2E(t, time.Hour)
	ctx := context.Background()
	adminSrv := httptest.NewServer(e.srv.admin)
	t.Cleanup(adminSrv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	read := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, page := read(browser.PostForm(adminSrv.URL+web.Prefix+"/login", url.Values{"token": {e2eAdminToken}, "next": {web.Prefix + "/"}}))
	require.Equal(t, http.StatusOK, code)
	token := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	require.Len(t, token, 2)
	project := func(action string) {
		t.Helper()
		code, _ := read(browser.PostForm(adminSrv.URL+web.Prefix+"/projects/"+action,
			url.Values{"csrf": {token[1]}, "forge": {e.issue.Forge}, "repo": {e.issue.Repo}}))
		require.Equal(t, http.StatusOK, code)
	}
	project("pause")

	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	// Whatever the workers do meanwhile, a claim of this test's own finds nothing, and then the
	// mailbox is under no lease with its assignment still waiting: none of them took it.
	probe, err := e.srv.store.Lease(ctx, "probe", time.Minute)
	require.NoError(t, err)
	require.Nil(t, probe, "a mailbox of a paused project is not claimed")
	mb, err := e.srv.store.Find(ctx, e.issue)
	require.NoError(t, err)
	require.Nil(t, mb.LeaseOwner, "no worker holds it")
	pending, err := e.srv.store.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.NotEmpty(t, pending, "the assignment is stored and waits")
	require.Empty(t, e.comments())
	_, page = read(browser.Get(fmt.Sprintf("%s%s/mailboxes/%d", adminSrv.URL, web.Prefix, mb.ID)))
	require.Contains(t, page, "project paused")

	project("resume")
	require.Eventually(t, func() bool {
		cs := e.comments()
		return len(cs) > 0 && strings.Contains(cs[0], "Thanks @alice, I am on it")
	}, 2*time.Minute, 50*time.Millisecond, "the assignment was not acknowledged after the resume")
	_, page = read(browser.Get(fmt.Sprintf("%s%s/mailboxes/%d", adminSrv.URL, web.Prefix, mb.ID)))
	require.Regexp(t, `operator \(session [0-9a-f]{8}\) from 127\.0\.0\.1 paused the project`, page)
	require.Contains(t, page, "resumed the project")
	e.requireUniqueMarkers()
}
