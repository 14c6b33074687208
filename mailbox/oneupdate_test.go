package mailbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// TestLabelsAndAssignmentInOneEvent: one GitLab update that labelled the issue and assigned the
// bot (quick actions "/label ~type::task /assign @bot" in one comment, one delivery, a labels
// event carrying the assignee change) starts the work, with the type the label gives.
func TestLabelsAndAssignmentInOneEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fake.SetIssueLabels(b.ref, "alice", "type::task")
	b.fake.SetIssueAssignees(b.ref, "alice", forgetest.BotLogin)
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"},
		LabelsKnown: true, Labels: []string{"type::task"}, PreviousLabels: []string{},
		AssigneesKnown: true, Assignees: []string{forgetest.BotLogin}, PreviousAssignees: []string{}})
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "started: the analysis asks its question")
	require.Equal(t, "task", mb.Type, "the type the label gave, no type question")
	require.Contains(t, b.comments()[0], "Thanks @alice, I am on it")
}
