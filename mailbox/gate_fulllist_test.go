package mailbox_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/mailbox/gate"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// On Forgejo and Gitea a labels delivery carries the whole list and no previous one. mallory
// (triage: may label, may not steer) adds ai::validate_plan; alice (write) adds an unrelated
// label a moment later, before Alfred's pass undid mallory's, so alice's list still carries it.
// mallory's change is refused and undone, and the label in alice's list is not taken as hers:
// the label history shows mallory adding it.
func TestForgejoWritersLaterListDoesNotValidateANonWritersLabel(t *testing.T) {
	t.Parallel()
	b := setupGate(t, forge.KindForgejo)
	require.Equal(t, mailbox.StateWaitingValidation, b.assignBot().State)
	labels := b.s.IssueLabels(b.ref)
	b.label("mallory", append(slices.Clone(labels), "ai::validate_plan")...)
	b.label("alice", append(b.s.IssueLabels(b.ref), "frontend")...)
	mb := b.advance()
	require.NotContains(t, b.s.IssueLabels(b.ref), "ai::validate_plan", "mallory's label is undone")
	require.Contains(t, b.comments(), "@mallory, only a project member with write access can validate the plan")
	require.NotContains(t, b.comments(), "Plan validated by @alice", "mallory's label validated the plan in alice's name")
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
}

// The same with ai::auto_merge: not turned on in alice's name, nothing merged.
func TestForgejoWritersLaterListDoesNotEnableANonWritersAutoMerge(t *testing.T) {
	t.Parallel()
	b := setupGate(t, forge.KindForgejo)
	mr := b.toMRState(gate.Working)
	labels := b.s.IssueLabels(b.ref)
	b.s.SetIssueLabels(b.ref, "mallory", append(slices.Clone(labels), "ai::auto_merge")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "mallory"}, LabelsKnown: true,
		Labels: b.s.IssueLabels(b.ref)}) // as webhook/forgejo parses it: no PreviousLabels
	b.s.SetIssueLabels(b.ref, "alice", append(b.s.IssueLabels(b.ref), "frontend")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: b.s.IssueLabels(b.ref)})
	b.advance()
	b.s.AddReview(repo, mr, "bob", "approved", "")
	mb := b.poll()
	require.Contains(t, b.comments(), "@mallory, only a project member with write access can turn auto-merge on")
	require.NotContains(t, b.comments(), "Auto-merge is on, as @alice added", "mallory's label turned auto-merge on in alice's name")
	require.Empty(t, b.s.MergedWith(repo, mr), "a non-writer's label merged the pull request")
	require.Equal(t, mailbox.StateInReview, mb.State)
}

// mallory's delivery is lost: alice's list is the first to carry mallory's ai::validate_plan.
// It is not alice's, and validates nothing; alice's own ai::validate_plan in a whole list does.
func TestForgejoWholeListActsOnlyOnTheSendersLabels(t *testing.T) {
	t.Parallel()
	b := setupGate(t, forge.KindForgejo)
	require.Equal(t, mailbox.StateWaitingValidation, b.assignBot().State)
	b.s.SetIssueLabels(b.ref, "mallory", append(b.s.IssueLabels(b.ref), "ai::validate_plan")...)
	b.s.SetIssueLabels(b.ref, "alice", append(b.s.IssueLabels(b.ref), "frontend")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: b.s.IssueLabels(b.ref)})
	mb := b.advance()
	require.NotContains(t, b.comments(), "Plan validated by @alice", "mallory's label is not alice's")
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)

	labels := slices.DeleteFunc(b.s.IssueLabels(b.ref), func(l string) bool { return l == "ai::validate_plan" })
	b.s.SetIssueLabels(b.ref, "alice", labels...)
	b.s.SetIssueLabels(b.ref, "alice", append(slices.Clone(labels), "ai::validate_plan")...)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: b.s.IssueLabels(b.ref)})
	b.advance()
	require.Contains(t, b.comments(), "Plan validated by @alice", "alice's own label, in a whole list")
}

// alice (write) adds ai::validate_plan; before Alfred's pass, mallory (triage) takes it off and
// puts it back. The label history is read up to alice's change (the delivery's OccurredAt, the
// issue's updated_at as Forgejo sends it): alice's own delivery validates; mallory's re-add is
// refused.
func TestForgejoWritersLabelIsNotLostToALaterReAdd(t *testing.T) {
	t.Parallel()
	b := setupGate(t, forge.KindForgejo)
	require.Equal(t, mailbox.StateWaitingValidation, b.assignBot().State)
	base := b.s.IssueLabels(b.ref)
	with := append(slices.Clone(base), "ai::validate_plan")
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	b.s.SetClock(t0) // each change of the stand-in's moves its clock one second
	deliver := func(by string, at time.Time) {
		b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: by}, LabelsKnown: true,
			Labels: b.s.IssueLabels(b.ref), OccurredAt: at}) // as webhook/forgejo parses it: no PreviousLabels
	}
	b.s.SetIssueLabels(b.ref, "alice", with...)
	deliver("alice", t0.Add(time.Second))
	b.s.SetIssueLabels(b.ref, "mallory", base...)
	deliver("mallory", t0.Add(2*time.Second))
	b.s.SetIssueLabels(b.ref, "mallory", with...)
	deliver("mallory", t0.Add(3*time.Second))
	b.advance()
	require.Contains(t, b.comments(), "Plan validated by @alice. Starting the development.",
		"alice's own delivery of ai::validate_plan validates")
	require.Contains(t, b.comments(), "@mallory, only a project member with write access can validate the plan")
}
