package mailbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// alice ticks q1's b, then unticks it again (back to the default, every question has a box
// ticked). The outcome says the questions close at TickQuiet: a minute after her last click
// (spec/lifecycle.md "Answers": "else a minute after the last click") the round must close,
// not wait for the deadline.
func TestTickUndoneStillClosesAfterTheQuietTime(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	click := strings.Replace(block, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click}})
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.clock.Add(10 * time.Second)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: block}}) // b unticked again: the default a stays
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	b.clock.Add(mailbox.TickQuiet)
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State,
		"the timeline said the questions close a minute after alice's last click; they wait for the deadline")
}

// A single question (the type question): mallory (no write access) ticks "bug", refused.
// alice then unticks the default "analysis" (the first half of choosing another option): the
// refused tick must not become the answer in alice's name ("a tick the gate refused is taken
// with nobody's later click"), as in a block of several questions.
func TestRefusedTickOfASingleQuestionIsNotTakenWithALaterClick(t *testing.T) {
	t.Parallel()
	b := setup(t) // no type label: the type question, one question
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingType, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	evil := strings.Replace(block, "- [ ] **b. bug**", "- [x] **b. bug**", 1)
	require.NotEqual(t, block, evil)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "mallory"},
		Comment: &forge.Comment{ID: id, Body: evil}})
	require.Equal(t, mailbox.StateWaitingType, b.advance().State)
	click := strings.Replace(evil, "- [x] **c. analysis**", "- [ ] **c. analysis**", 1)
	require.NotEqual(t, evil, click)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click}})
	mb := b.advance()
	require.NotEqual(t, "bug", mb.Type, "mallory's refused tick answered the type question in alice's name")
}

// alice ticks q1, bob (write) ticks q2: every question is ticked and the round closes at once.
// The block's notice must name both, as closeTicks does for the same ticks after the quiet
// time ("Answered by @alice and @bob."), not only the last clicker.
func TestAllTickedAtOnceNamesEveryTicker(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.fake.AddUser("bob")
	b.fake.SetAccess(repo, "bob", true)
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	click1 := strings.Replace(block, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click1}})
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	click2 := strings.Replace(click1, "- [ ] **b. Without a header**", "- [x] **b. Without a header**", 1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "bob"},
		Comment: &forge.Comment{ID: id, Body: click2}})
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	var blockNow string
	for _, c := range b.fake.IssueComments(b.ref) {
		if c.ID == id {
			blockNow = c.Body
		}
	}
	require.Contains(t, blockNow, "Answered by @alice and @bob.")
}

// mallory's refused tick of q2, then alice's reply "q1: b": q2 keeps its default.
func TestReplyAfterARefusedTick(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	evil := strings.Replace(block, "- [ ] **b. Without a header**", "- [x] **b. Without a header**", 1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "mallory"},
		Comment: &forge.Comment{ID: id, Body: evil}})
	b.advance()
	b.deliver(comment("alice", "q1: b"))
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	body := b.fake.IssueBody(b.ref)
	require.Contains(t, body, "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, body, "| q2. Header row? | a. With a header | default |")
}
