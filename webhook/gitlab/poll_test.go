package gitlab_test

import (
	"testing"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestClientPollConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunPollConformance(t, func(t *testing.T) (forge.Poller, forgetest.ReviewSeeder) {
		s := forgetest.NewGitLabServer(t)
		return newClient(t, s, s.Token), s
	})
}
