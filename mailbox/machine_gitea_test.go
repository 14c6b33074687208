package mailbox_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// Found against a real Gitea 1.25: an issue opened already assigned to the bot is delivered as
// "issue_assign" first and "issues/opened" second. The late "opened" carries the assignees from
// before Alfred assigned the author; the author must still be unassigned once they answer.
func TestLateOpenedDeliveryStillHandsBack(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	require.Contains(t, b.fake.IssueAssignees(b.ref), "alice")

	b.deliver(forge.Event{Type: forge.EventIssueOpened, Sender: forge.User{Login: "alice"},
		Author: forge.User{Login: "alice"}, AssigneesKnown: true, Assignees: []string{forgetest.BotLogin}})
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)

	b.deliver(comment("alice", "q1: b"))
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.NotContains(t, b.fake.IssueAssignees(b.ref), "alice", "the turn is handed back")
}

// A retry that fails again says so in a new comment, after the "Retrying" one.
func TestRetryThatFailsAgainPostsANewBlockComment(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.failures["analysis.functional"] = "agent wrote no result"
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Contains(t, b.lastComment(), "(attempt 1) failed")

	b.deliver(comment("alice", "retry"))
	mb = b.advance()
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Contains(t, b.lastComment(), "(attempt 2) failed", "comments:\n%s", strings.Join(b.comments(), "\n---\n"))
	require.Contains(t, strings.Join(b.comments(), "\n"), "(attempt 1) failed", "the first block comment is kept")
	b.requireUniqueMarkers()
}
