package mailbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// TestAuthorAssignedByAHumanStaysAssigned: the author assigned themselves with the bot before
// Alfred asked anything, so the questions do not assign them and the answers do not unassign
// them: Alfred hands back only the turn it took (TestLifecycleTaskWithReply is the other case).
func TestAuthorAssignedByAHumanStaysAssigned(t *testing.T) {
	t.Parallel()
	b := setup(t) // no type label: the type question first, then the analysis's questions
	b.fake.SetIssueAssignees(b.ref, "alice", "alice", forgetest.BotLogin)

	b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "alice"}, AssigneesKnown: true,
		Assignees: []string{"alice", forgetest.BotLogin}})
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingType, mb.State)
	require.Contains(t, b.lastComment(), "tell me what kind of work this is")
	require.ElementsMatch(t, []string{"alice", forgetest.BotLogin}, b.fake.IssueAssignees(b.ref))

	b.deliver(comment("alice", "task"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "the analysis's questions")
	require.ElementsMatch(t, []string{"alice", forgetest.BotLogin}, b.fake.IssueAssignees(b.ref),
		"alice assigned herself: the answer to the type question leaves her assigned")

	b.deliver(comment("alice", "q1: b"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.ElementsMatch(t, []string{"alice", forgetest.BotLogin}, b.fake.IssueAssignees(b.ref),
		"alice assigned herself: the answers leave her assigned")
	activity, err := b.fake.Activity(context.Background(), b.ref, time.Time{})
	require.NoError(t, err)
	for _, a := range activity {
		require.False(t, a.Actor.Login == forgetest.BotLogin && a.Login == "alice",
			"the bot never changed alice's assignment: %+v", a)
	}
}

// TestRebuildKeepsWhoAssignedTheAuthor: a store rebuilt while questions wait reads from the
// issue's assignee history who assigned the author, so the answers unassign an author Alfred
// assigned and leave one who assigned herself.
func TestRebuildKeepsWhoAssignedTheAuthor(t *testing.T) {
	t.Parallel()
	for _, selfAssigned := range []bool{false, true} {
		t.Run(map[bool]string{false: "assigned by Alfred", true: "assigned by herself"}[selfAssigned], func(t *testing.T) {
			t.Parallel()
			b := setupPG(t, "type::task")
			ev := assign("alice")
			if selfAssigned {
				b.fake.SetIssueAssignees(b.ref, "alice", "alice", forgetest.BotLogin)
				ev.Assignees = []string{"alice", forgetest.BotLogin}
			}
			b.deliver(ev)
			require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
			require.Contains(t, b.fake.IssueAssignees(b.ref), "alice")

			b.loseStore()
			b.fake.AddComment(b.ref, "alice", "q1: b")
			require.Equal(t, 1, b.reconcile().Events)
			require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
			if selfAssigned {
				require.Contains(t, b.fake.IssueAssignees(b.ref), "alice", "she assigned herself: she stays")
			} else {
				require.NotContains(t, b.fake.IssueAssignees(b.ref), "alice", "Alfred assigned her: the turn is handed back")
			}
		})
	}
}

// TestAuthorAssignedByAlfredIsHandedBack: an author already assigned when Alfred asks, by the
// bot itself, is unassigned after the answers: assigned by a pass that failed after the
// assignment and was tried again, or while an earlier lifecycle, cancelled, waited for them.
func TestAuthorAssignedByAlfredIsHandedBack(t *testing.T) {
	t.Parallel()
	t.Run("a pass tried again", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "type::task")
		b.deliver(assign("alice"))
		assigned, failed := false, false
		b.fake.SetErrorHook(func(method string, _ forge.IssueRef) error {
			switch {
			case method == "SetAssignees":
				assigned = true
			case assigned && !failed && method == "Issue":
				failed = true
				return fmt.Errorf("after the assignment: %w", forge.ErrUnavailable)
			}
			return nil
		})
		mb, err := b.store.Find(context.Background(), b.ref)
		require.NoError(t, err)
		require.Error(t, b.machine.Advance(context.Background(), mb), "the pass fails after assigning alice")
		require.True(t, failed)
		require.Contains(t, b.fake.IssueAssignees(b.ref), "alice")
		require.Equal(t, mailbox.StateWaitingInfo, b.advance().State, "tried again")

		b.deliver(comment("alice", "q1: b"))
		require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
		require.NotContains(t, b.fake.IssueAssignees(b.ref), "alice", "the bot assigned her: the turn is handed back")
	})
	t.Run("a lifecycle cancelled and started again", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "type::task")
		b.deliver(assign("alice"))
		require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
		require.Contains(t, b.fake.IssueAssignees(b.ref), "alice")
		b.fake.SetIssueAssignees(b.ref, "alice", "alice")
		b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "alice"}, AssigneesKnown: true,
			Assignees: []string{"alice"}})
		require.Equal(t, mailbox.StateCancelled, b.advance().State)
		b.fake.SetIssueAssignees(b.ref, "alice", "alice", forgetest.BotLogin)
		b.deliver(forge.Event{Type: forge.EventAssignees, Sender: forge.User{Login: "alice"}, AssigneesKnown: true,
			Assignees: []string{"alice", forgetest.BotLogin}})
		require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)

		b.deliver(comment("alice", "q1: b"))
		require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
		require.NotContains(t, b.fake.IssueAssignees(b.ref), "alice", "the bot assigned her in the first lifecycle: handed back")
	})
}
