package forgejo_test

import (
	"testing"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestClientPollConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunPollConformance(t, func(t *testing.T) (forge.Poller, forgetest.ReviewSeeder) {
		s := forgetest.NewForgejoServer(t)
		return newClient(t, s.URL, s.Token), s
	})
}
