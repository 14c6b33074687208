package mailbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// A review_fix outcome whose every reply was posted before the pass failed (the summary
// comment in the issue answered 502) is acted on again by the next pass with the comments the
// run was given, not those still unanswered on the forge (none): the summary is posted, the
// pushed head is the merge request's head and the issue goes to CI, as when the pass had not
// failed, and no reply is posted twice.
func TestReviewFixActedOnAgainAfterItsRepliesWerePosted(t *testing.T) {
	t.Parallel()
	b := setupReview(t)
	b.toCI()
	b.ciEverywhere(forge.CISuccess)
	mb := b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	mr := forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true}
	body := "@" + forgetest.BotLogin + " please rename the button to Export CSV"
	id := b.fake.AddComment(mr, "alice", body)
	b.deliver(forge.Event{Type: forge.EventComment, Target: mr, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: body}})
	b.advance()
	b.exec.results["review_fix"] = &phase.Result{Summary: "renamed", CommitMessage: "Rename",
		Comments: []phase.CommentOutcome{{ID: id, Outcome: phase.OutcomeFixed, Reply: "Renamed."}}}
	failed := false
	b.fake.SetErrorHook(func(method string, ref forge.IssueRef) error {
		if method == "Comment" && !ref.MergeRequest && ref.Number == b.ref.Number && !failed {
			failed = true // the summary in the issue, after the reply in the merge request
			return fmt.Errorf("502: %w", forge.ErrUnavailable)
		}
		return nil
	})
	jobs := len(b.exec.jobs)
	b.clock.Add(2 * time.Second) // the review's quiet time
	b.failedPass()
	require.True(t, failed)
	require.Len(t, b.exec.jobs, jobs+1, "one review_fix run")
	pushed := fmt.Sprintf("%040d", b.exec.jobs[jobs].RunID)
	b.clock.Add(time.Minute)
	mb = b.advance()
	require.Len(t, b.exec.jobs, jobs+1, "the run is not run again")
	summaries := 0
	for _, c := range b.comments() {
		if strings.Contains(c, "I went through the review of") {
			summaries++
		}
	}
	require.Equal(t, 1, summaries, "the review_fix summary is posted once")
	require.Equal(t, pushed, mb.HeadSHA, "the review_fix's push is the head")
	runs, err := b.store.Runs(context.Background(), mb.ID)
	require.NoError(t, err)
	last := runs[len(runs)-1]
	require.Equal(t, "review_fix", last.Phase)
	require.True(t, last.Applied, "the stored outcome is acted on, not discarded")
	replies := 0
	cs, err := b.fake.Comments(context.Background(), mr)
	require.NoError(t, err)
	for _, c := range cs {
		if c.Author.Login == forgetest.BotLogin && strings.Contains(c.Body, "Renamed.") {
			replies++
		}
	}
	require.Equal(t, 1, replies, "the comment is answered once")
	require.Contains(t, mb.Data.Handled, id, "the comment is handled")
	require.Equal(t, 1, mb.Data.ReviewAttempts, "one run, counted once")
}
