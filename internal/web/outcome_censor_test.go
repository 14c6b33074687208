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

// A run's outcome as the store keeps it ("infrastructure error: " and the runner's error, as
// mailbox records it) is shown by the mailbox page, the run page and the timeline: every page
// is censored as rendered, not only its log. A secret holding a character HTML escapes ('+'
// from openssl rand -base64, '&', '<', '>', quotes), which html/template writes "&#43;", is
// hidden from the browser too.
func TestRunOutcomeIsCensoredOnThePages(t *testing.T) {
	t.Parallel()
	for name, sec := range map[string]string{"plain": secret, "escaped by HTML": "Zk3+q9Lw/u7T&b<X>\"r'2"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mem := webtest.NewMemory()
			outcome := "infrastructure error: prepare worktree: dial docker with " + sec + ": connection refused"
			mem.AddMailbox(web.MailboxDetail{MailboxSummary: web.MailboxSummary{ID: 9, Forge: "gitea", Repo: "a/b", Number: 1, State: "idle"},
				Timeline: []web.TimelineEntry{{At: t0, Kind: "run", Text: "run 90: development interrupted: " + outcome}},
				Runs: []web.RunSummary{{ID: 90, MailboxID: 9, Phase: "development", Attempt: 1, Status: "interrupted", Outcome: outcome,
					StartedAt: t0, FinishedAt: t0}}})
			h, err := web.New(web.Config{Reader: mem, Redact: censor.New(censor.Config{Secrets: []string{sec}}).String})
			require.NoError(t, err)
			srv := httptest.NewServer(h)
			defer srv.Close()
			for _, p := range []string{"/mailboxes/9", "/runs/90"} {
				code, body := get(t, srv.URL+web.Prefix+p)
				require.Equal(t, http.StatusOK, code, p)
				assert.False(t, strings.Contains(html.UnescapeString(body), sec), "%s shows the secret to the browser", p)
				assert.Contains(t, body, "dial docker with [redacted]", "%s shows the outcome", p)
			}
		})
	}
}
