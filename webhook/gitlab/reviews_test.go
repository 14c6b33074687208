package gitlab_test

import (
	"testing"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestClientReviewConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunReviewConformance(t, func(t *testing.T) (forge.Forge, forgetest.ReviewSeeder) {
		s := forgetest.NewGitLabServer(t)
		return newClient(t, s, s.Token), s
	})
}

func TestClientMergeConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunMergeConformance(t, func(t *testing.T) (forge.Forge, forgetest.MergeSeeder) {
		s := forgetest.NewGitLabServer(t)
		return newClient(t, s, s.Token), s
	})
}
