package web_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/internal/web/webtest"
)

// The pages name a merge request as its forge's users do: "pull request #4" on Forgejo and
// Gitea (found on a real Gitea: the page said "merge request !4"), "merge request !4" on GitLab,
// in the mailbox's facts and in the list's link of a merge request's mailbox.
func TestMergeRequestNamedAsTheForgeNamesIt(t *testing.T) {
	t.Parallel()
	mem := webtest.NewMemory()
	for i, f := range []string{"gitea", "gitlab"} {
		id := int64(i + 1)
		mem.AddMailbox(web.MailboxDetail{MailboxSummary: web.MailboxSummary{ID: id, Forge: f, Repo: "alice/shop",
			Number: 3, Title: "Add a cart", State: "in_review", LastEventAt: t0},
			Branch: "agent/issue-3-add-a-cart", MergeRequestNumber: 4})
		mem.AddMailbox(web.MailboxDetail{MailboxSummary: web.MailboxSummary{ID: id + 10, Forge: f, Repo: "alice/" + f,
			Number: 9, MergeRequest: true, IssueURL: "http://forge.example/" + f, Title: "Someone's change",
			State: "in_review", LastEventAt: t0}})
	}
	h, err := web.New(web.Config{Reader: mem, Logs: mem, Settings: mem, Redact: func(s string) string { return s },
		PullRequests: func(name string) bool { return name == "gitea" }})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	code, body := get(t, srv.URL+web.Prefix+"/mailboxes/1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "pull request #4")
	require.NotContains(t, body, "merge request !4")
	code, body = get(t, srv.URL+web.Prefix+"/mailboxes/2")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "merge request !4")

	code, body = get(t, srv.URL+web.Prefix+"/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, ">alice/gitea#9</a>")
	require.Contains(t, body, ">alice/gitlab!9</a>")
}
