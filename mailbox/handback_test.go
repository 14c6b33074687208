package mailbox_test

import (
	"context"
	"fmt"
	"strings"
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
		b.failedPass("the pass fails after assigning alice")
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

// TestAnswersStoredByAFailedPass: the answers of a round are stored before the forge is told;
// a pass that failed after storing them (the forge unavailable) is tried again and finishes the
// round as it was answered: the reply's choice reaches the technical analysis, in its author's
// name; defaults the deadline stored are not taken for a reply that came later.
func TestAnswersStoredByAFailedPass(t *testing.T) {
	t.Parallel()
	t.Run("a reply", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "type::task")
		b.deliver(assign("alice"))
		b.advance()
		b.deliver(comment("alice", "q1: b"))
		b.fake.FailNextCall("EditComment", forge.ErrUnavailable) // the block marked answered
		b.failedPass()
		mb := b.advance()
		require.Equal(t, mailbox.StateWaitingValidation, mb.State)
		last := b.exec.jobs[len(b.exec.jobs)-1]
		require.Equal(t, "technical", string(last.Input.Step))
		require.Equal(t, map[string]string{"q1": "Semicolon"}, last.Input.Decisions, "the decision survives the retry")
		require.Contains(t, b.comments()[1], "**Answered by @alice.**")
	})
	t.Run("the deadline, then a reply", func(t *testing.T) {
		t.Parallel()
		b := setup(t, "type::task")
		b.deliver(assign("alice"))
		b.advance()
		b.clock.Add(25 * time.Hour)
		b.fake.FailNextCall("Comment", forge.ErrUnavailable) // "I applied the defaults"
		b.failedPass()
		b.deliver(comment("alice", "q1: b"))
		mb := b.advance()
		require.Equal(t, mailbox.StateWaitingValidation, mb.State)
		all := strings.Join(b.comments(), "\n---\n")
		require.Contains(t, all, "so I applied the defaults", "the defaults are said")
		require.NotContains(t, all, "Answered by @alice", "the defaults were applied before her reply")
		require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | a. Comma | default |")
		last := b.exec.jobs[len(b.exec.jobs)-1]
		require.Equal(t, map[string]string{"q1": "Comma"}, last.Input.Decisions)
	})
}
