package mailbox_test

import (
	"context"
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
