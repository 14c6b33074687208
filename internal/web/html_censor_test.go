package web_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/internal/web/webtest"
)

// A secret holding a character HTML escapes ('+' from openssl rand -base64 and the others) in
// a stored text a page shows (a run's outcome, the timeline): html/template writes "&#43;", and
// the page, censored as rendered, still hides it from the browser.
func TestPagesHideASecretTheHTMLEscapes(t *testing.T) {
	t.Parallel()
	const sec = "Zk3+q9Lw/u7T&b<X>\"r'2"
	c := censor.New(censor.Config{Secrets: []string{sec}})
	mem := webtest.NewMemory()
	outcome := "infrastructure error: prepare worktree: dial docker with " + sec + ": connection refused"
	mem.AddMailbox(web.MailboxDetail{MailboxSummary: web.MailboxSummary{ID: 9, Forge: "gitea", Repo: "a/b", Number: 1, State: "idle"},
		Timeline: []web.TimelineEntry{{At: t0, Kind: "run", Text: "run 90: development interrupted: " + outcome}},
		Runs: []web.RunSummary{{ID: 90, MailboxID: 9, Phase: "development", Attempt: 1, Status: "interrupted", Outcome: outcome,
			StartedAt: t0, FinishedAt: t0}}})
	h, err := web.New(web.Config{Reader: mem, Redact: c.String})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, p := range []string{"/mailboxes/9", "/runs/90"} {
		code, body := get(t, srv.URL+web.Prefix+p)
		require.Equal(t, http.StatusOK, code, p)
		assert.False(t, strings.Contains(html.UnescapeString(body), sec), "%s shows the secret to the browser", p)
	}
}
