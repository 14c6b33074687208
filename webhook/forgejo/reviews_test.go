package forgejo_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestClientReviewConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunReviewConformance(t, func(t *testing.T) (forge.Forge, forgetest.ReviewSeeder) {
		s := forgetest.NewForgejoServer(t)
		return newClient(t, s.URL, s.Token), s
	})
}

// Gitea 1.25 has no call to add a comment to a review: Reply falls back to a review of its own
// at the same path and line.
func TestClientReviewConformanceGitea(t *testing.T) {
	t.Parallel()
	forgetest.RunReviewConformance(t, func(t *testing.T) (forge.Forge, forgetest.ReviewSeeder) {
		s := forgetest.NewForgejoServer(t)
		s.NoReviewCommentCall = true
		return newClient(t, s.URL, s.Token), s
	})
}

func TestClientMergeConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunMergeConformance(t, func(t *testing.T) (forge.Forge, forgetest.MergeSeeder) {
		s := forgetest.NewForgejoServer(t)
		return newClient(t, s.URL, s.Token), s
	})
}

// countReviewLists counts the list calls of pull request reviews (GET …/pulls/{n}/reviews).
type countReviewLists struct {
	n    atomic.Int64
	next http.RoundTripper
}

func (c *countReviewLists) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/reviews") {
		c.n.Add(1)
	}
	return c.next.RoundTrip(r)
}

// MergeChecks lists a pull request's reviews once, for the verdicts and the threads alike.
func TestMergeChecksListsReviewsOnce(t *testing.T) {
	t.Parallel()
	s := forgetest.NewForgejoServer(t)
	s.AddRepo(forgetest.ConformanceRepo, "main", forgetest.ConformanceCloneURL)
	s.AddUser("alice")
	s.SetAccess(forgetest.ConformanceRepo, "alice", true)
	n := s.AddMergeRequest(forgetest.ConformanceRepo, "agent/issue-1", "main", "Add note column", "")
	s.AddReview(forgetest.ConformanceRepo, n, "alice", "changes_requested", "Fix it.",
		forgetest.SeedReviewComment{Path: "report.py", NewLine: 7, Body: "A currency column."})
	lists := &countReviewLists{next: http.DefaultTransport}
	c, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: s.URL, Token: s.Token, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: lists}})
	require.NoError(t, err)
	checks, err := c.MergeChecks(t.Context(), forgetest.ConformanceRepo, n)
	require.NoError(t, err)
	require.Equal(t, 1, checks.OpenThreads)
	require.Equal(t, []string{"alice"}, checks.ChangesRequested)
	require.Equal(t, int64(1), lists.n.Load(), "one page of reviews, listed once")
}
