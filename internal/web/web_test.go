package web_test

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/internal/web/webtest"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

const secret = "s3cr3t-token-value"

type testBundle struct {
	mem *webtest.Memory
	srv *httptest.Server
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	mem := webtest.NewMemory()
	mem.AddMailbox(web.MailboxDetail{
		MailboxSummary: web.MailboxSummary{ID: 1, Forge: "gitea", Repo: "alice/shop", Number: 3, Title: "Add a cart",
			IssueURL: "http://forge.example/alice/shop/issues/3", State: "done", LastEvent: "pull_request (closed)",
			LastEventAt: t0.Add(-3 * time.Hour), CostUSD: 0.0421, Closed: true},
		Runs: []web.RunSummary{{ID: 10, Phase: "analysis", Step: "functional", Attempt: 1, Status: "succeeded",
			StartedAt: t0.Add(-4 * time.Hour), FinishedAt: t0.Add(-4*time.Hour + 42*time.Second), Container: "alfred-mbx1-analysis-a1",
			Session: &web.Session{Adapter: "claude-code", Name: "agent/issue-3-add-a-cart", NativeID: "0b6c-native", TokensIn: 1200, TokensOut: 340, CostUSD: 0.0421, Rated: true}}},
	})
	mem.AddMailbox(web.MailboxDetail{
		MailboxSummary: web.MailboxSummary{ID: 2, Forge: "gitea", Repo: "alice/shop", Number: 7, Title: "Fix the search",
			State: "in_development", Phase: "development", Running: true, LastEvent: "issue_label (label_updated)",
			LastEventAt: t0.Add(-5 * time.Minute), Unrated: 2},
		Branch: "agent/issue-7-fix-the-search",
		Timeline: []web.TimelineEntry{
			{At: t0.Add(-20 * time.Minute), Kind: "event", Text: "issue_assign (assigned) by alice"},
			{At: t0.Add(-20 * time.Minute), Kind: "decision", Text: "acknowledged; functional analysis due"},
		},
		Runs: []web.RunSummary{
			{ID: 20, Phase: "analysis", Attempt: 1, Status: "succeeded", StartedAt: t0.Add(-19 * time.Minute), FinishedAt: t0.Add(-18 * time.Minute),
				Session: &web.Session{Adapter: "codex", Name: "agent/issue-7-fix-the-search", NativeID: "thread-1", TokensIn: 900, TokensOut: 80}},
			{ID: 21, Phase: "development", Attempt: 1, Status: "running", StartedAt: t0.Add(-2 * time.Minute), Container: "alfred-mbx2-development-a1",
				Session: &web.Session{Adapter: "codex", Name: "agent/issue-7-fix-the-search", NativeID: "thread-1", Resumed: true}},
		},
	})
	mem.SetOutput(10, "analysis done\n")
	mem.SetLog("alfred-mbx2-development-a1", "step 1: reading the code\nusing token "+secret+"\nstep 2: editing search.go\n")
	mem.SetSettings("", []web.Setting{{Name: "budget_usd", Value: "none", Source: "default"}})
	mem.SetSettings("alice/shop", []web.Setting{{Name: "budget_usd", Value: "5.00", Source: "project alice/shop"},
		{Name: "branch_prefix", Value: "agent/", Source: "default"}})
	h, err := web.New(web.Config{Reader: mem, Logs: mem, Settings: mem, Now: func() time.Time { return t0 },
		Redact: func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testBundle{mem: mem, srv: srv}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	u := b.srv.URL + web.Prefix

	code, body := get(t, u+"/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `href="http://forge.example/alice/shop/issues/3"`)
	require.Contains(t, body, "$0.0421")
	require.Contains(t, body, "unrated") // mailbox 2: adapter without cost, never "free" or $0
	require.NotContains(t, body, "free")
	require.Contains(t, body, `<span class="badge running">running</span>`)

	code, body = get(t, u+"/mailboxes/2")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<meta http-equiv="refresh" content="2">`)
	require.Contains(t, body, "acknowledged; functional analysis due")
	require.Contains(t, body, "thread-1")
	require.Contains(t, body, "resumed")
	require.Contains(t, body, "2m0s") // running for 2 minutes at t0

	code, body = get(t, u+"/runs/21")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "step 2: editing search.go")
	require.Contains(t, body, "live container log")
	require.NotContains(t, body, secret)
	require.Contains(t, body, "[redacted]")

	code, body = get(t, u+"/runs/21/log")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, secret)

	code, body = get(t, u+"/runs/10")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "analysis done")
	require.NotContains(t, body, `http-equiv="refresh"`)

	code, body = get(t, u+"/settings?project=alice/shop")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "project alice/shop")

	for _, p := range []string{"/mailboxes/99", "/runs/99", "/mailboxes/x"} {
		code, _ = get(t, u+p)
		require.Equal(t, http.StatusNotFound, code, p)
	}
}

// The live log is censored before it is cut to what the page shows: a secret the cut would
// split (its head before the window, its tail inside) never shows in part.
func TestLiveLogCutNeverSplitsASecret(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, k := range []int{1, 7, len(secret) - 1} {
		b.mem.SetLog("alfred-mbx2-development-a1", "key="+secret+strings.Repeat("y", web.DefaultLogBytes-k))
		for _, p := range []string{"/runs/21", "/runs/21/log"} {
			code, body := get(t, b.srv.URL+web.Prefix+p)
			require.Equal(t, http.StatusOK, code)
			require.NotContains(t, body, secret[len(secret)-k:]+"yyy", "k=%d %s", k, p)
			require.Contains(t, body, "yyyy", p)
		}
	}
}

// A mailbox whose timeline was cut to its latest entries says so.
func TestCutTimelineSaysSo(t *testing.T) {
	t.Parallel()
	mem := webtest.NewMemory()
	mem.AddMailbox(web.MailboxDetail{MailboxSummary: web.MailboxSummary{ID: 1, Forge: "gitea", Repo: "alice/shop", Number: 3,
		Title: "Busy", State: "idle", ShadowWrites: 501}, Timeline: []web.TimelineEntry{{At: t0, Kind: "event", Text: "issue_comment by bob"}},
		TimelineCut: true, ShadowCut: true,
		Shadow: []web.ShadowPost{{ID: 2, At: t0, Kind: "comment", CommentID: -2, Body: "the latest write"}}})
	h, err := web.New(web.Config{Reader: mem, Now: func() time.Time { return t0 }, Redact: func(s string) string { return s }})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	code, body := get(t, srv.URL+web.Prefix+"/mailboxes/1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, fmt.Sprintf("Only the latest %d events", web.MaxTimelineEvents))
	require.Contains(t, body, fmt.Sprintf("Only the latest %d writes are shown", web.MaxTimelineEvents), "the shadow list says so too")
}

func TestGoneContainerSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.mem.SetLog("alfred-mbx2-development-a1", "")
	mem := webtest.NewMemory()
	mem.AddMailbox(web.MailboxDetail{MailboxSummary: web.MailboxSummary{ID: 5, Repo: "a/b", Number: 1},
		Runs: []web.RunSummary{{ID: 50, Phase: "development", Status: "running", StartedAt: t0, Container: "gone"}}})
	h, err := web.New(web.Config{Reader: mem, Logs: mem, Redact: func(s string) string { return s }})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, web.Prefix+"/runs/50", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.Contains(t, rec.Body.String(), "container log unavailable: the container is gone")
}

func TestPagesInChromium(t *testing.T) {
	t.Parallel()
	b := setup(t)
	br := webtest.NewBrowser(t)
	u := b.srv.URL + web.Prefix
	for _, tc := range []struct{ path, name, want string }{
		{"/", "web-mailboxes", "alice/shop#7"},
		{"/mailboxes/2", "web-mailbox", "thread-1"},
		{"/runs/21", "web-run-live", "step 2: editing search.go"},
		{"/settings?project=alice/shop", "web-settings", "project alice/shop"},
	} {
		p := br.Load(t, u+tc.path, tc.name)
		require.Contains(t, p.DOM, tc.want, tc.path)
		require.NotContains(t, p.DOM, secret, tc.path)
	}
}

// Every answer of the pages, whatever its status, forbids framing and sniffing.
func TestEveryAnswerForbidsFraming(t *testing.T) {
	t.Parallel()
	b := setup(t)
	u := b.srv.URL + web.Prefix
	for _, p := range []string{"/", "/mailboxes/1", "/mailboxes/2", "/runs/10", "/runs/21", "/runs/21/log",
		"/settings", "/settings?project=alice/shop", "/assets/alfred.css", "/mailboxes/99", "/nothing"} {
		resp, err := http.Get(u + p)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'", p)
		require.Equal(t, "DENY", resp.Header.Get("X-Frame-Options"), p)
		require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), p)
	}
}

// The mailbox list is paged: with 250 mailboxes and pages of 100, following the "older" links
// from the first page shows every mailbox once, newest first, and each page links back; the
// first page in Chromium shows its range and the link to the next.
func TestMailboxListIsPaged(t *testing.T) {
	t.Parallel()
	const total, size = 250, 100
	mem := webtest.NewMemory()
	for i := int64(1); i <= total; i++ {
		mem.AddMailbox(web.MailboxDetail{MailboxSummary: web.MailboxSummary{ID: i, Forge: "gitea", Repo: "alice/shop",
			Number: i, Title: fmt.Sprintf("Issue %d", i), State: "idle"}})
	}
	h, err := web.New(web.Config{Reader: mem, Limit: size, Now: func() time.Time { return t0 },
		Redact: func(s string) string { return s }})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	rowID := regexp.MustCompile(`data-mailbox="(\d+)"`)
	next := regexp.MustCompile(`<a rel="next" href="([^"]+)"`)
	prev := regexp.MustCompile(`<a rel="prev" href="([^"]+)"`)
	var seen []int64
	path, pages := web.Prefix+"/", 0
	for path != "" {
		code, body := get(t, srv.URL+path)
		require.Equal(t, http.StatusOK, code, path)
		pages++
		var ids []int64
		for _, m := range rowID.FindAllStringSubmatch(body, -1) {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			ids = append(ids, id)
		}
		require.NotEmpty(t, ids, path)
		require.LessOrEqual(t, len(ids), size, path)
		seen = append(seen, ids...)
		if pages > 1 {
			p := prev.FindStringSubmatch(body)
			require.NotNil(t, p, "page %d links to the newer page", pages)
			require.Equal(t, fmt.Sprintf("%s/?page=%d", web.Prefix, pages-1), html.UnescapeString(p[1]))
		} else {
			require.NotRegexp(t, prev, body, "the first page has no newer page")
		}
		path = ""
		if m := next.FindStringSubmatch(body); m != nil {
			path = html.UnescapeString(m[1])
		}
		require.LessOrEqual(t, pages, 3)
	}
	require.Equal(t, 3, pages)
	require.Len(t, seen, total)
	for i, id := range seen {
		require.EqualValues(t, total-i, id, "every mailbox once, newest first")
	}

	for _, bad := range []string{"0", "-1", "x", "1.5"} {
		code, _ := get(t, srv.URL+web.Prefix+"/?page="+bad)
		require.Equal(t, http.StatusBadRequest, code, bad)
	}
	code, body := get(t, srv.URL+web.Prefix+"/?page=9")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "No mailboxes on page 9.")

	br := webtest.NewBrowser(t)
	p := br.Load(t, srv.URL+web.Prefix+"/?page=2", "web-mailboxes-page-2")
	require.Contains(t, p.DOM, "mailboxes 101–200")
	require.Contains(t, p.DOM, "older →")
	require.Contains(t, p.DOM, "← newer")
	require.Contains(t, p.DOM, "Issue 150")
	require.NotContains(t, p.DOM, "Issue 250")
}
