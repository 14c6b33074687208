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

// Another bot's derived labels apply its change alone: a reader's refused ai::auto_merge, taken
// off the forge, is not put back in the mailbox by the bot's later event, so a writer's own
// ai::auto_merge after it is still a difference the next look derives.
func TestDerivedOtherBotLabelsApplyTheirChangeAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.fake.AddUser("renovate-bot")
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(comment("alice", "q1: b"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)

	cur := b.fake.IssueLabels(b.ref)
	b.fake.SetIssueLabels(b.ref, "mallory", append(slices.Clone(cur), "ai::auto_merge")...)
	b.fake.SetIssueLabels(b.ref, "renovate-bot", append(slices.Clone(cur), "ai::auto_merge", "dependencies")...)

	v := mailbox.ReconcileView{MailboxID: mb.ID, Ref: mb.Ref(), Author: mb.Author, Labels: mb.Labels,
		Assignees: mb.Assignees, CommentsSince: time.Now().Add(24 * time.Hour * 3650)}
	d, err := mailbox.DeriveEvents(context.Background(), b.fake, forgetest.BotLogin, v, b.clock.Now())
	require.NoError(t, err)
	for _, ev := range d.Events {
		_, err := b.store.Deliver(context.Background(), ev)
		require.NoError(t, err)
	}
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
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(comment("alice", "q1: b"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	// GitLab: mallory adds status::blocked; the scoped label replaces status::waiting_validation
	var next []string
	for _, l := range b.fake.IssueLabels(b.ref) {
		if l != "status::waiting_validation" {
			next = append(next, l)
		}
	}
	b.fake.SetIssueLabels(b.ref, "mallory", append(next, "status::blocked")...)
	v := mailbox.ReconcileView{MailboxID: mb.ID, Ref: mb.Ref(), Author: mb.Author, Labels: mb.Labels,
		Assignees: mb.Assignees, CommentsSince: time.Now().Add(24 * time.Hour * 3650)}
	d, err := mailbox.DeriveEvents(context.Background(), b.fake, forgetest.BotLogin, v, b.clock.Now())
	require.NoError(t, err)
	for _, ev := range d.Events {
		_, err := b.store.Deliver(context.Background(), ev)
		require.NoError(t, err)
	}
	mb = b.advance()
	require.Contains(t, b.fake.IssueLabels(b.ref), "status::waiting_validation", "the refused change is undone whole")
}

// A derived labels event that names another bot (the history's actor) leaves the mailbox's labels
// as they are: a human's delivery of the same label, applied after it, is still a change, and
// validates the plan.
func TestDerivedOtherBotLabelsHideNoHumanDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	b.advance()
	b.deliver(comment("alice", "q1: b"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	prev := slices.Clone([]string(mb.Labels))
	next := append(slices.Clone(prev), "ai::validate_plan")
	derived := forge.Event{Type: forge.EventLabels, Action: "reconcile", Sender: forge.User{Login: "renovate-bot"},
		LabelsKnown: true, PreviousLabels: prev, Labels: next}
	b.deliver(derived)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true, Labels: next})
	mb = b.advance()
	require.NotEqual(t, mailbox.StateWaitingValidation, mb.State, "alice's delivery validated the plan")
}
