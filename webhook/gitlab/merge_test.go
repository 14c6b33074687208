package gitlab_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

// GitLab merges the merge request, but the answer is lost on the way back (502). The
// client does not send the merge again, which GitLab would answer 405 for a merge request
// already merged, reported as a refusal (forge.ErrRefused) that auto-merge tells the issue as
// "the forge refused to merge it": the error is the 502 (forge.ErrUnavailable), and the next
// pass reads the merge request merged.
func TestClientMergeMadeBeforeA502IsNotRetried(t *testing.T) {
	t.Parallel()
	srv := forgetest.NewGitLabServer(t)
	front := forgetest.NewLostAnswer(t, srv.URL, func(r *http.Request) bool {
		return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/merge") // GitLab merges
	})
	c, err := gitlab.NewClient(gitlab.ClientConfig{BaseURL: front.URL, Token: srv.Token,
		RetryWaitMin: time.Millisecond, RetryWaitMax: 10 * time.Millisecond})
	require.NoError(t, err)
	srv.AddRepo("acme/shop", "main", "/nonexistent.git")
	n := srv.AddMergeRequest("acme/shop", "feature", "main", "Feature", forgetest.BotLogin)
	mr, err := c.MergeRequest(t.Context(), "acme/shop", n)
	require.NoError(t, err)
	err = c.Merge(t.Context(), "acme/shop", n, forge.MergeOptions{HeadSHA: mr.HeadSHA})
	after, rerr := c.MergeRequest(t.Context(), "acme/shop", n)
	require.NoError(t, rerr)
	require.True(t, after.Merged, "GitLab merged it")
	require.ErrorIs(t, err, forge.ErrUnavailable, "a merge GitLab made is not reported as refused")
	require.NotErrorIs(t, err, forge.ErrRefused)
}
