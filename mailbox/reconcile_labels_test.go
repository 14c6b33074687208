package mailbox_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// A reader's ai::validate_plan then a writer's unrelated label, both missed: the reader's event
// is refused (its label undone), and the writer's event applies the writer's label alone, so the
// plan is not validated in the writer's name.
func TestDerivedReaderLabelIsNotTakenWithAWritersLater(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(comment("alice", "q1: b"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)

	cur := b.fake.IssueLabels(b.ref)
	b.fake.SetIssueLabels(b.ref, "mallory", append(slices.Clone(cur), "ai::validate_plan")...)
	b.fake.SetIssueLabels(b.ref, "alice", append(slices.Clone(cur), "ai::validate_plan", "frontend")...)

	v := mailbox.ReconcileView{MailboxID: mb.ID, Ref: mb.Ref(), Author: mb.Author, Labels: mb.Labels,
		Assignees: mb.Assignees, CommentsSince: time.Now().Add(24 * time.Hour * 3650)}
	d, err := mailbox.DeriveEvents(context.Background(), b.fake, forgetest.BotLogin, v, b.clock.Now())
	require.NoError(t, err)
	for _, ev := range d.Events {
		_, err := b.store.Deliver(context.Background(), ev)
		require.NoError(t, err)
	}
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State, "mallory's validation must not be taken as alice's")
}

// A reader's label change already delivered and refused (undone by the bot) is in the history
// window of the next reconciliation; a writer's later, missed, re-add of the same label is the
// label's last entry: only the writer's change is derived, and the reader's is not judged again
// (its refusal would undo the writer's label on the forge).
func TestDerivedLabelsDoNotReplayAHandledRefusal(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(comment("alice", "q1: b"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	is, err := b.fake.Issue(context.Background(), b.ref)
	require.NoError(t, err)
	last := is.UpdatedAt // the last reconciliation's look

	cur := b.fake.IssueLabels(b.ref)
	b.fake.SetIssueLabels(b.ref, "mallory", append(slices.Clone(cur), "ai::auto_merge")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "mallory"}, LabelsKnown: true,
		Labels: b.fake.IssueLabels(b.ref)})
	mb = b.advance()
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::auto_merge", "mallory's label undone")
	cur = b.fake.IssueLabels(b.ref)
	b.fake.SetIssueLabels(b.ref, "alice", append(slices.Clone(cur), "ai::auto_merge")...) // delivery missed

	v := mailbox.ReconcileView{MailboxID: mb.ID, Ref: mb.Ref(), Author: mb.Author, Labels: mb.Labels,
		Assignees: mb.Assignees, IssueUpdatedAt: last, CommentsSince: time.Now().Add(24 * time.Hour * 3650)}
	d, err := mailbox.DeriveEvents(context.Background(), b.fake, forgetest.BotLogin, v, b.clock.Now())
	require.NoError(t, err)
	for _, ev := range d.Events {
		_, err := b.store.Deliver(context.Background(), ev)
		require.NoError(t, err)
	}
	mb = b.advance()
	require.Contains(t, b.fake.IssueLabels(b.ref), "ai::auto_merge", "alice's label stays")
	require.Contains(t, mb.Labels, "ai::auto_merge", "the mailbox knows it")
}
