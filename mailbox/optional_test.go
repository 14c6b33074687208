package mailbox

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// nopShadowLog records nothing: the shadow wrapper of a project that is not in shadow mode
// never asks it.
type nopShadowLog struct{}

func (nopShadowLog) RecordShadow(context.Context, ShadowWrite) (int64, error) { return 0, nil }
func (nopShadowLog) ShadowWrites(context.Context, forge.IssueRef) ([]ShadowWrite, error) {
	return nil, nil
}

// The wrappers of a forge during a pass (the shadow wrapper, the post guard, then the effects count) keep each
// optional interface of the client (forge.Reviews, forge.Merger) on its own and claim none the
// client lacks, and the effects count counts the optional calls too.
func TestWrappersKeepEachOptionalInterface(t *testing.T) {
	fake := forgetest.NewFake(forge.KindForgejo)
	cases := map[string]struct {
		f              forge.Forge
		reviews, merge bool
	}{
		"both": {f: fake, reviews: true, merge: true},
		"reviews only": {f: struct {
			forge.Forge
			forge.Reviews
		}{fake, fake}, reviews: true},
		"merge only": {f: struct {
			forge.Forge
			forge.Merger
		}{fake, fake}, merge: true},
		"neither": {f: struct{ forge.Forge }{fake}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			fx := new(effects)
			shadowed := Shadow(c.f, ShadowConfig{Log: nopShadowLog{}}) // off: every call is the client's
			got := fx.bot(Bot{Forge: GuardPosts(shadowed, PostGuard{})}).Forge
			rv, isReviews := got.(forge.Reviews)
			mg, isMerger := got.(forge.Merger)
			require.Equal(t, c.reviews, isReviews, "forge.Reviews kept as the client has it")
			require.Equal(t, c.merge, isMerger, "forge.Merger kept as the client has it")
			ctx := context.Background()
			if isReviews {
				before := fx.count()
				_, _ = rv.ReviewComments(ctx, "acme/app", 1)
				require.Equal(t, before+1, fx.count(), "a review call is counted")
			}
			if isMerger {
				before := fx.count()
				_, _ = mg.MergeChecks(ctx, "acme/app", 1)
				_ = mg.Merge(ctx, "acme/app", 1, forge.MergeOptions{})
				require.Equal(t, before+2, fx.count(), "the merge calls are counted")
			}
		})
	}
}
