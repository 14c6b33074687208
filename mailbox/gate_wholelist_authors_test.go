package mailbox_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// alice (write) adds ai::auto_merge and her delivery is lost; mallory (triage) then adds an
// unrelated label, and her whole list (Forgejo) is the first to carry alice's label. By the
// label history it is alice's, which she may set: it acts (spec/authorization.md: "A label its
// author may set acts (... a lost delivery of a writer's)"). It must act as alice's: auto-merge
// on by alice, and the pull request merged once bob approves.
func TestApprovedAutoMergeInANonWritersListIsTheAuthors(t *testing.T) {
	t.Parallel()
	b := setupGate(t, forge.KindForgejo)
	mr := b.toMRState(gate.Working)
	b.s.SetIssueLabels(b.ref, "alice", append(b.s.IssueLabels(b.ref), "ai::auto_merge")...) // delivery lost
	b.s.SetIssueLabels(b.ref, "mallory", append(b.s.IssueLabels(b.ref), "frontend")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "mallory"}, LabelsKnown: true,
		Labels: b.s.IssueLabels(b.ref)}) // as webhook/forgejo parses it: no PreviousLabels
	b.advance()
	b.s.AddReview(repo, mr, "bob", "approved", "")
	mb := b.poll()
	b.poll()
	require.NotEmpty(t, b.s.MergedWith(repo, mr), "alice's auto-merge did not merge: AutoMergeBy %q, waits %q", mb.Data.AutoMergeBy, mb.Data.AutoMergeWaits)
	require.Contains(t, b.comments(), "Auto-merge is on, as @alice added", "alice's label credited to mallory")
}

// The same with ai::validate_plan: the validation is alice's, not mallory's.
func TestApprovedValidationInANonWritersListIsTheAuthors(t *testing.T) {
	t.Parallel()
	b := setupGate(t, forge.KindForgejo)
	require.Equal(t, mailbox.StateWaitingValidation, b.assignBot().State)
	b.s.SetIssueLabels(b.ref, "alice", append(b.s.IssueLabels(b.ref), "ai::validate_plan")...) // delivery lost
	b.s.SetIssueLabels(b.ref, "mallory", append(slices.Clone(b.s.IssueLabels(b.ref)), "frontend")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "mallory"}, LabelsKnown: true,
		Labels: b.s.IssueLabels(b.ref)})
	mb := b.advance()
	require.Equal(t, mailbox.StateInCI, mb.State, b.comments())
	require.NotContains(t, b.comments(), "Plan validated by @mallory", "alice's validation credited to mallory")
	require.Equal(t, "alice", mb.Data.ValidatedBy)
}

// alice (write) turns auto-merge on; mallory (triage) takes ai::auto_merge off, which the gate
// lets anyone do (only a removed status::blocked is a steering input), and her own delivery
// turns auto-merge off. Here her delivery is lost and alice's next whole list (an unrelated
// label) is the first to show the removal: it must turn auto-merge off too, not be kept as
// "another's change" in the mailbox's view while the label is off the forge.
func TestNonWritersLostRemovalOfAutoMergeInAWritersList(t *testing.T) {
	t.Parallel()
	for _, lost := range []bool{false, true} {
		b := setupGate(t, forge.KindForgejo)
		mr := b.toMRState(gate.Working)
		b.label("alice", append(b.s.IssueLabels(b.ref), "ai::auto_merge")...)
		require.Contains(t, b.advance().Labels, "ai::auto_merge")
		without := slices.DeleteFunc(b.s.IssueLabels(b.ref), func(l string) bool { return l == "ai::auto_merge" })
		if lost {
			b.s.SetIssueLabels(b.ref, "mallory", without...)
		} else {
			b.label("mallory", without...)
		}
		b.label("alice", append(b.s.IssueLabels(b.ref), "frontend")...)
		mb := b.advance()
		b.s.AddReview(repo, mr, "bob", "approved", "")
		b.poll()
		require.Empty(t, b.s.MergedWith(repo, mr), "lost=%v: merged although ai::auto_merge was taken off", lost)
		require.NotContains(t, mb.Labels, "ai::auto_merge", "lost=%v: the mailbox still sees the label the forge does not have", lost)
	}
}
