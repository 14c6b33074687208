package web_test

import (
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/internal/web/webtest"
)

// costPages serves two mailboxes with unrated runs: #9 with a rated run, a run whose adapter
// reported no cost, a run without a session record and a run that ran no agent; #10 whose only
// run has no session record. The sums are the store's (sqlstoretest UnratedRunsAreNotFree).
func costPages(t *testing.T) string {
	t.Helper()
	mem := webtest.NewMemory()
	fin := func(id int64, phase, container string, s *web.Session) web.RunSummary {
		return web.RunSummary{ID: id, Phase: phase, Attempt: 1, Status: "succeeded", StartedAt: t0.Add(-time.Hour),
			FinishedAt: t0.Add(-time.Hour + 20*time.Second), Container: container, Session: s}
	}
	mem.AddMailbox(web.MailboxDetail{
		MailboxSummary: web.MailboxSummary{ID: 3, Forge: "gitea", Repo: "alice/shop", Number: 9, Title: "Unrated work",
			State: "in_review", LastEvent: "pull_request (opened)", LastEventAt: t0.Add(-time.Hour), CostUSD: 0.42, Unrated: 2},
		Runs: []web.RunSummary{
			fin(30, "analysis", "alfred-mbx3-analysis-a1", &web.Session{Adapter: "claude-code", Name: "agent/issue-9", TokensIn: 10, TokensOut: 2, CostUSD: 0.42, Rated: true}),
			fin(31, "development", "alfred-mbx3-development-a1", &web.Session{Adapter: "codex", Name: "agent/issue-9", TokensIn: 10, TokensOut: 2}),
			fin(32, "ci_fix", "alfred-mbx3-ci_fix-a1", nil),
			fin(33, "conflict_resolution", "", nil),
			{ID: 34, Phase: "review_fix", Attempt: 1, Status: "running", StartedAt: t0.Add(-10 * time.Second), Container: "alfred-mbx3-review_fix-a1"},
		},
	})
	mem.AddMailbox(web.MailboxDetail{
		MailboxSummary: web.MailboxSummary{ID: 4, Forge: "gitea", Repo: "alice/shop", Number: 10, Title: "Sessions off",
			State: "in_review", LastEvent: "issue_assign (assigned)", LastEventAt: t0.Add(-2 * time.Hour), Unrated: 1},
		Runs: []web.RunSummary{fin(40, "analysis", "alfred-mbx4-analysis-a1", nil)},
	})
	h, err := web.New(web.Config{Reader: mem, Now: func() time.Time { return t0 }, Redact: func(s string) string { return s }})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + web.Prefix
}

// cell returns the text of the element of class class inside the element carrying attr.
func cell(t *testing.T, dom, attr, class string) string {
	t.Helper()
	m := regexp.MustCompile(`(?s)` + regexp.QuoteMeta(attr) + `.*?class="` + class + `">([^<]*)<`).FindStringSubmatch(dom)
	require.NotNil(t, m, "no %s cell after %s", class, attr)
	return m[1]
}

// TestUnratedCostInChromium: a run without a reported cost reads "unrated" in its row and on its
// page, and a sum that leaves unrated runs out says how many — never "$0.0000" or "free" — as
// headless Chromium renders the pages.
func TestUnratedCostInChromium(t *testing.T) {
	t.Parallel()
	u := costPages(t)
	br := webtest.NewBrowser(t)

	list := br.Load(t, u+"/", "web-cost-mailboxes").DOM
	require.Contains(t, list, "cost so far $0.4200 + 3 unrated runs")
	require.Contains(t, list, "<td>$0.4200 + 2 unrated runs</td>")
	require.Contains(t, list, "<td>1 unrated run</td>", "a mailbox whose runs are all unrated is not $0")

	page := br.Load(t, u+"/mailboxes/3", "web-cost-mailbox").DOM
	require.Contains(t, page, "$0.4200 + 2 unrated runs · ")
	for run, want := range map[string]string{
		"30": "$0.4200",         // reported
		"31": "unrated",         // the adapter reported no cost
		"32": "unrated",         // no session record
		"33": "none (no agent)", // no container: nothing ran
		"34": "pending",         // still running
	} {
		require.Equal(t, want, cell(t, page, `data-run="`+run+`"`, "cost"), "run %s", run)
	}

	only := br.Load(t, u+"/mailboxes/4", "web-cost-mailbox-unrated").DOM
	require.Contains(t, only, "1 unrated run · ")
	require.Equal(t, "unrated", cell(t, only, `data-run="40"`, "cost"))

	run := br.Load(t, u+"/runs/32", "web-cost-run").DOM
	require.Equal(t, "unrated", cell(t, run, `<dt>Cost</dt>`, "cost"))

	for _, dom := range []string{list, page, only, run} {
		require.NotContains(t, dom, "$0.0000")
		require.NotContains(t, dom, "free")
	}
}
