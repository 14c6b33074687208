package forgejo_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
)

// A fork's pull request from a branch named as the bot's is not the bot's: opening the bot's
// pull request creates its own instead of taking the fork's (whose head anyone with the fork
// may push, and auto-merge would merge), and a read of the fork's says FromFork.
func TestForkPullRequestIsNotTheBots(t *testing.T) {
	t.Parallel()
	const fork = `{"number":7,"title":"Mine","state":"open","head":{"ref":"agent/issue-1","sha":"1111111111111111111111111111111111111111","repo_id":99},` +
		`"base":{"ref":"main","repo_id":1}}`
	created := false
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		p := r.URL.Path
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(p, "/repos/acme/shop/pulls"):
			w.Header().Set("X-Total-Count", "1")
			_, _ = fmt.Fprint(w, "["+fork+"]")
		case r.Method == http.MethodGet && strings.HasSuffix(p, "/repos/acme/shop/pulls/7"):
			_, _ = fmt.Fprint(w, fork)
		case r.Method == http.MethodPost && strings.HasSuffix(p, "/repos/acme/shop/pulls"):
			created = true
			w.WriteHeader(http.StatusCreated)
			_, _ = fmt.Fprint(w, `{"number":8,"title":"Bot","state":"open","head":{"ref":"agent/issue-1","sha":"2222222222222222222222222222222222222222","repo_id":1},`+
				`"base":{"ref":"main","repo_id":1}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprint(w, `{"message":"not found"}`)
		}
	}))
	t.Cleanup(s.Close)
	c, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: s.URL, Token: "t", MaxRetries: -1})
	require.NoError(t, err)

	mr, err := c.CreateMergeRequest(t.Context(), "acme/shop", forge.NewMergeRequest{Title: "Bot", SourceBranch: "agent/issue-1", TargetBranch: "main"})
	require.NoError(t, err)
	require.True(t, created, "the bot's own pull request is created")
	require.EqualValues(t, 8, mr.Number)
	require.False(t, mr.FromFork)

	read, err := c.MergeRequest(t.Context(), "acme/shop", 7)
	require.NoError(t, err)
	require.True(t, read.FromFork)
}

// An answer without end fails the call once past forgehttp.MaxAnswerBytes instead of being
// read whole.
func TestEndlessAnswerFails(t *testing.T) {
	t.Parallel()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"title":"`)
		chunk := strings.Repeat("x", 1<<20)
		for range 80 {
			if _, err := fmt.Fprint(w, chunk); err != nil {
				return
			}
		}
		_, _ = fmt.Fprint(w, `"}`)
	}))
	t.Cleanup(s.Close)
	c, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: s.URL, Token: "t", MaxRetries: -1})
	require.NoError(t, err)
	_, err = c.MergeRequest(t.Context(), "acme/shop", 7)
	require.ErrorContains(t, err, "larger than")
}
