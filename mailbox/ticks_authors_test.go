package mailbox_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// alice ticks q1; bob (write) then ticks q2 in the same block: every question is ticked, the
// round closes, and each tick must be credited to whoever clicked it (spec/lifecycle.md: "each
// choice credited to whoever made it").
func TestTickOfOneAndTickOfAnotherKeepTheirAuthors(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.fake.AddUser("bob")
	b.fake.SetAccess(repo, "bob", true)
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	click1 := strings.Replace(block, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	require.NotEqual(t, block, click1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click1}})
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	click2 := strings.Replace(click1, "- [ ] **b. Without a header**", "- [x] **b. Without a header**", 1)
	require.NotEqual(t, click1, click2)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "bob"},
		Comment: &forge.Comment{ID: id, Body: click2}})
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |",
		"alice's tick is credited to bob")
}

// mallory (no write access, not the author) ticks q2 in the block: refused. alice (the author)
// then ticks q1: her edit carries mallory's tick too, and mallory's refused choice must not
// become the answer to q2 in alice's name.
func TestRefusedTickIsNotTakenWithALaterTick(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.fake.AddUser("mallory")
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	evil := strings.Replace(block, "- [ ] **b. Without a header**", "- [x] **b. Without a header**", 1)
	require.NotEqual(t, block, evil)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "mallory"},
		Comment: &forge.Comment{ID: id, Body: evil}})
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	click := strings.Replace(evil, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click}})
	b.advance()
	require.NotContains(t, b.fake.IssueBody(b.ref), "| q2. Header row? | b. Without a header |",
		"mallory's refused tick answered q2")
}
