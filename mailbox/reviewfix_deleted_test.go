package mailbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// deletingForge is the fake on which alice deletes one of her comments (gone) while the
// review_fix run works on it: from the first reply Alfred tries on, it is no longer listed and
// a reply to it is a 404.
// deletingForge is the fake forge where one comment (gone) is deleted by its author at the
// first reply to it.
type deletingForge struct {
	*forgetest.Fake
	gone    int64
	deleted atomic.Bool
}

func (d *deletingForge) Comments(ctx context.Context, ref forge.IssueRef) ([]forge.Comment, error) {
	cs, err := d.Fake.Comments(ctx, ref)
	if d.deleted.Load() {
		out := cs[:0:0]
		for _, c := range cs {
			if c.ID != d.gone {
				out = append(out, c)
			}
		}
		cs = out
	}
	return cs, err
}

func (d *deletingForge) Reply(ctx context.Context, repo string, number int64, to forge.ReviewComment, body string) (int64, error) {
	if to.ID == d.gone {
		d.deleted.Store(true)
		return 0, fmt.Errorf("reply: 404 Not Found: %w", forge.ErrNotFound)
	}
	return d.Fake.Reply(ctx, repo, number, to, body)
}

// A comment the reviewer deletes while review_fix works on it fails the first pass that acts
// on the outcome (its reply is a 404). Before e419624 the next pass read the comments again and
// went on; now it acts on the comments the run was given and replies to the deleted one again
// at every pass: the issue never leaves review_fix.
// A review comment its author deleted while the review_fix run worked on it: the reply to it
// answers 404, and the outcome is acted on for the other comments instead of failing every
// pass for ever.
func TestReviewFixWithACommentDeletedMeanwhileGoesOn(t *testing.T) {
	t.Parallel()
	b := setupReview(t)
	df := &deletingForge{Fake: b.fake}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b.machine = mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute, CIFixAttempts: 1,
		ReviewFixAttempts: 2, RetryUntilGreenMax: 2, ReviewQuiet: time.Second}, b.store,
		map[string]mailbox.Bot{"gl": {Forge: df, Login: forgetest.BotLogin}}, b.exec, b.clock.Now, log)
	b.toCI()
	b.ciEverywhere(forge.CISuccess)
	mb := b.poll()
	require.Equal(t, mailbox.StateInReview, mb.State)
	mr := forge.IssueRef{Forge: "gl", Repo: repo, Number: mb.MRNumber, MergeRequest: true}
	var ids []int64
	for _, body := range []string{"please rename the button to Export CSV", "and add a tooltip"} {
		body = "@" + forgetest.BotLogin + " " + body
		id := b.fake.AddComment(mr, "alice", body)
		ids = append(ids, id)
		b.deliver(forge.Event{Type: forge.EventComment, Target: mr, Sender: forge.User{Login: "alice"},
			Comment: &forge.Comment{ID: id, Body: body}})
	}
	df.gone = ids[1]
	b.advance()
	b.exec.results["review_fix"] = &phase.Result{Summary: "renamed", CommitMessage: "Rename",
		Comments: []phase.CommentOutcome{{ID: ids[0], Outcome: phase.OutcomeFixed, Reply: "Renamed."},
			{ID: ids[1], Outcome: phase.OutcomeFixed, Reply: "Added."}}}
	b.clock.Add(2 * time.Second)
	jobs := len(b.exec.jobs)
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.NoError(t, b.machine.Advance(context.Background(), mb), "a comment deleted while the run worked fails no pass")
	require.True(t, df.deleted.Load(), "the reply to the deleted comment was tried")
	require.Len(t, b.exec.jobs, jobs+1, "one review_fix run")
	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateInReview, mb.State, "the outcome is acted on")
	require.Contains(t, mb.Data.Handled, ids[0])
	require.Contains(t, mb.Data.Handled, ids[1], "the deleted comment is not waited for")
	require.Equal(t, 1, b.countComments("I went through the review of"))
}
