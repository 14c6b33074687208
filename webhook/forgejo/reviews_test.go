package forgejo_test

import (
	"testing"

	"github.com/alfred-bot/alfred/webhook/forge"
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
