package mailbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// TestOriginOfAForksMergeRequest: the machine takes an event for the bot's merge request by its
// number, or by the branch when the event names no number; a merge request of the bot's
// branch name with another number (a fork's) is not the bot's, whatever the store routed.
func TestOriginOfAForksMergeRequest(t *testing.T) {
	t.Parallel()
	bot := Bot{Login: "alfred"}
	mb := &Mailbox{Forge: "gl", Repo: "acme/shop", Number: 7, Branch: "agent/issue-7", MRNumber: 12}
	mr := func(number int64, branch string) forge.Event {
		return forge.Event{Type: forge.EventMergeRequestClosed, Sender: forge.User{Login: "mallory"},
			Target:       forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: number, MergeRequest: number != 0},
			MergeRequest: &forge.MergeRequest{Number: number, SourceBranch: branch}}
	}
	require.True(t, originOf(mr(12, "agent/issue-7"), bot, mb).onOurMR, "its number and branch")
	require.True(t, originOf(mr(0, "agent/issue-7"), bot, mb).onOurMR, "its branch, no number named")
	require.False(t, originOf(mr(57, "agent/issue-7"), bot, mb).onOurMR, "a fork's: the branch's name, another number")
	before := *mb
	before.MRNumber = 0
	require.False(t, originOf(mr(57, "agent/issue-7"), bot, &before).onOurMR, "no merge request of the bot's yet")
	fork := mr(0, "agent/issue-7")
	fork.MergeRequest.FromFork = true
	require.False(t, originOf(fork, bot, mb).onOurMR, "a fork's, though it names no number")
}

// TestOneUpdateThatUnassignsTheBotCancels: a labels event that also unassigned the bot (one
// GitLab update, "/unassign @alfred /label ~x") stops a running phase as an unassignment does.
func TestOneUpdateThatUnassignsTheBotCancels(t *testing.T) {
	t.Parallel()
	bot := Bot{Login: "alfred"}
	mb := &Mailbox{Number: 7, Labels: StringList{"status::in_development"}}
	ev := forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, Target: forge.IssueRef{Number: 7},
		LabelsKnown: true, Labels: []string{"status::in_development", "x"}, PreviousLabels: []string{"status::in_development"},
		AssigneesKnown: true, Assignees: []string{}, PreviousAssignees: []string{"alfred"}}
	require.True(t, cancels(ev, bot, mb, "status::blocked"))
	ev.PreviousAssignees, ev.Assignees = []string{"alfred"}, []string{"alfred", "bob"}
	require.False(t, cancels(ev, bot, mb, "status::blocked"), "the bot still assigned")
}

// TestFoldKeepsTheAssignmentOfALabelsEvent: a labels event that carried an assignment, folded
// with a later labels event of the same person, keeps the assignment.
func TestFoldKeepsTheAssignmentOfALabelsEvent(t *testing.T) {
	t.Parallel()
	first := StoredEvent{ID: 1, Event: forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"},
		LabelsKnown: true, Labels: []string{"x"}, PreviousLabels: []string{},
		AssigneesKnown: true, Assignees: []string{"alfred"}, PreviousAssignees: []string{}}}
	second := StoredEvent{ID: 2, Event: forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"},
		LabelsKnown: true, Labels: []string{"x", "y"}, PreviousLabels: []string{"x"},
		AssigneesKnown: true, Assignees: []string{"alfred"}}}
	groups := foldEvents([]StoredEvent{first, second})
	require.Len(t, groups, 1)
	ev := groups[0].last.Event
	require.True(t, assigneesChanged(ev), "the assignment of the first event survives the fold")
	require.Equal(t, []string{}, ev.PreviousLabels)
	require.Equal(t, []string{"x", "y"}, ev.Labels)
}

// TestHistoryOnceReadsTheWholeHistoryOnce: a rebuild asks for an issue's whole history twice
// (the labels' trust, who assigned the author); the forge is read once, a bounded read each time.
func TestHistoryOnceReadsTheWholeHistoryOnce(t *testing.T) {
	t.Parallel()
	fake := forgetest.NewFake(forge.KindGitLab)
	fake.AddUser("alice")
	fake.AddRepo("acme/shop", "main", "/nonexistent.git")
	n := fake.AddIssue("acme/shop", forgetest.SeedIssue{Title: "t", Author: "alice"})
	ref := forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: n}
	fake.SetIssueAssignees(ref, "alice", "alice")
	reads := 0
	fake.SetErrorHook(func(method string, _ forge.IssueRef) error {
		if method == "Activity" {
			reads++
		}
		return nil
	})
	h := &historyOnce{Forge: fake}
	for range 2 {
		acts, err := h.Activity(t.Context(), ref, time.Time{})
		require.NoError(t, err)
		require.NotEmpty(t, acts)
	}
	require.Equal(t, 1, reads, "the whole history is read once")
	_, err := h.Activity(t.Context(), ref, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, reads, "a bounded read goes to the forge")
}
