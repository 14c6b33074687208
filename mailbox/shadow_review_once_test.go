package mailbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// In shadow mode, a review of someone else's merge request is recorded; the pass then
// fails (the forge answers 502 to the read of the status labels) and the next pass acts on the
// same stored outcome again. Live, the review's marker keeps it from being posted twice
// (postedKeys); in shadow the record must hold it once too.
func TestShadowReviewRecordedOnceAfterAFailedPass(t *testing.T) {
	t.Parallel()
	b, log, _ := setupShadow(t)
	b.exec.results["review"] = &phase.Result{Summary: "Looks fine.", ReviewComments: []phase.ReviewNote{
		{Path: "a.go", Line: 1, Body: "Check the error."}}}
	n := b.fake.AddMergeRequest(repo, "feature", "main", "Feature", "alice")
	mr := forge.IssueRef{Forge: "gl", Repo: repo, Number: n, MergeRequest: true}
	b.deliver(forge.Event{Type: forge.EventReviewRequested, Target: mr, Sender: forge.User{Login: "alice"},
		ReviewRequested: []string{forgetest.BotLogin}})
	reviews := func() int {
		k := 0
		for _, w := range log.All() {
			if w.Kind == mailbox.ShadowReview {
				k++
			}
		}
		return k
	}
	failed := false
	b.fake.SetErrorHook(func(method string, ref forge.IssueRef) error {
		if method == "Issue" && ref.MergeRequest && reviews() > 0 && !failed {
			failed = true // the status label read after the review was recorded
			return fmt.Errorf("502: %w", forge.ErrUnavailable)
		}
		return nil
	})
	ctx := context.Background()
	mb, err := b.store.Find(ctx, mr)
	require.NoError(t, err)
	require.Error(t, b.machine.Advance(ctx, mb))
	require.True(t, failed)
	require.Equal(t, 1, reviews())
	mb, err = b.store.Find(ctx, mr)
	require.NoError(t, err)
	require.NoError(t, b.machine.Advance(ctx, mb))
	mb, err = b.store.Find(ctx, mr)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateIdle, mb.State, "the review is done")
	require.Len(t, b.exec.jobs, 1, "one review run")
	require.Equal(t, 1, reviews(), "the review is recorded once")
}
