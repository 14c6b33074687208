package forgetest_test

import (
	"testing"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestFakeReviewConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunReviewConformance(t, func(t *testing.T) (forge.Forge, forgetest.ReviewSeeder) {
		f := forgetest.NewFake(forge.KindGitLab)
		return f, f
	})
}

func TestFakeMergeConformance(t *testing.T) {
	t.Parallel()
	forgetest.RunMergeConformance(t, func(t *testing.T) (forge.Forge, forgetest.MergeSeeder) {
		f := forgetest.NewFake(forge.KindGitLab)
		return f, f
	})
}
