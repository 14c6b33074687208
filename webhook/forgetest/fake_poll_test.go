package forgetest_test

import (
	"testing"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestFakePollConformance(t *testing.T) {
	t.Parallel()
	for _, kind := range []forge.Kind{forge.KindForgejo, forge.KindGitLab} {
		t.Run(string(kind), func(t *testing.T) {
			forgetest.RunPollConformance(t, func(t *testing.T) (forge.Poller, forgetest.ReviewSeeder) {
				f := forgetest.NewFake(kind)
				return f, f
			})
		})
	}
}
