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

// reconcileView is mb as the reconciliation reads it, its last look at the issue at since (zero:
// none), the comments left out.
func reconcileView(mb *mailbox.Mailbox, since time.Time) mailbox.ReconcileView {
	return mailbox.ReconcileView{MailboxID: mb.ID, Ref: mb.Ref(), Author: mb.Author, Labels: mb.Labels,
		Assignees: mb.Assignees, IssueUpdatedAt: since, CommentsSince: time.Now().Add(24 * time.Hour * 3650)}
}

// deriveAndDeliver derives what changed on the forge since v and stores it, as the
// reconciliation does.
func (b *bundle) deriveAndDeliver(v mailbox.ReconcileView) mailbox.Derived {
	b.t.Helper()
	d, err := mailbox.DeriveEvents(context.Background(), b.fake, forgetest.BotLogin, v, b.clock.Now())
	require.NoError(b.t, err)
	for _, ev := range d.Events {
		_, err := b.store.Deliver(context.Background(), ev)
		require.NoError(b.t, err)
	}
	return d
}

// A reader's ai::validate_plan then a writer's unrelated label, both missed: the reader's event
// is refused (its label undone), and the writer's event applies the writer's label alone, so the
// plan is not validated in the writer's name.
func TestDerivedReaderLabelIsNotTakenWithAWritersLater(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	mb := b.toValidation()

	cur := b.fake.IssueLabels(b.ref)
	b.fake.SetIssueLabels(b.ref, "mallory", append(slices.Clone(cur), "ai::validate_plan")...)
	b.fake.SetIssueLabels(b.ref, "alice", append(slices.Clone(cur), "ai::validate_plan", "frontend")...)

	b.deriveAndDeliver(reconcileView(mb, time.Time{}))
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
	mb := b.toValidation()
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

	b.deriveAndDeliver(reconcileView(mb, last))
	mb = b.advance()
	require.Contains(t, b.fake.IssueLabels(b.ref), "ai::auto_merge", "alice's label stays")
	require.Contains(t, mb.Labels, "ai::auto_merge", "the mailbox knows it")
}

// Another bot's derived labels are not written into the mailbox's labels: a reader's refused
// ai::auto_merge, taken off the forge, is not put back in the mailbox by the bot's later event,
// so a writer's own ai::auto_merge after it is still a difference the next look derives.
func TestDerivedOtherBotLabelsApplyTheirChangeAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.fake.AddUser("renovate-bot")
	mb := b.toValidation()

	cur := b.fake.IssueLabels(b.ref)
	b.fake.SetIssueLabels(b.ref, "mallory", append(slices.Clone(cur), "ai::auto_merge")...)
	b.fake.SetIssueLabels(b.ref, "renovate-bot", append(slices.Clone(cur), "ai::auto_merge", "dependencies")...)

	v := reconcileView(mb, time.Time{})
	d := b.deriveAndDeliver(v)
	mb = b.advance()
	require.NotContains(t, b.fake.IssueLabels(b.ref), "ai::auto_merge", "mallory's label undone on the forge")
	b.clock.Add(2 * time.Minute)
	cur = b.fake.IssueLabels(b.ref)
	b.fake.SetIssueLabels(b.ref, "alice", append(slices.Clone(cur), "ai::auto_merge")...)
	v.Labels, v.IssueUpdatedAt = mb.Labels, d.IssueUpdatedAt
	d2, err := mailbox.DeriveEvents(context.Background(), b.fake, forgetest.BotLogin, v, b.clock.Now())
	require.NoError(t, err)
	require.NotEmpty(t, d2.Events, "alice's ai::auto_merge is derived")
}

// A refused scoped label is undone whole: the label of its scope the same change replaced
// (GitLab's scoped labels, Gitea's exclusive ones) is put back with it.
func TestRefusedScopedLabelRestoresItsScope(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	mb := b.toValidation()
	// GitLab: mallory adds status::blocked; the scoped label replaces status::waiting_validation
	var next []string
	for _, l := range b.fake.IssueLabels(b.ref) {
		if l != "status::waiting_validation" {
			next = append(next, l)
		}
	}
	b.fake.SetIssueLabels(b.ref, "mallory", append(next, "status::blocked")...)
	b.deriveAndDeliver(reconcileView(mb, time.Time{}))
	mb = b.advance()
	require.Contains(t, b.fake.IssueLabels(b.ref), "status::waiting_validation", "the refused change is undone whole")
}

// A derived labels event that names another bot (the history's actor) leaves the mailbox's labels
// as they are: a human's delivery of the same label, applied after it, is still a change, and
// validates the plan.
func TestDerivedOtherBotLabelsHideNoHumanDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	mb := b.toValidation()
	prev := slices.Clone([]string(mb.Labels))
	next := append(slices.Clone(prev), "ai::validate_plan")
	derived := forge.Event{Type: forge.EventLabels, Action: "reconcile", Sender: forge.User{Login: "renovate-bot"},
		LabelsKnown: true, PreviousLabels: prev, Labels: next}
	b.deliver(derived)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true, Labels: next})
	mb = b.advance()
	require.NotEqual(t, mailbox.StateWaitingValidation, mb.State, "alice's delivery validated the plan")
}
