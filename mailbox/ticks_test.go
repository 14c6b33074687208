package mailbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// The block says "Tick one box per question": with two questions, alice ticks q1's b, then
// q2's b, one edit per click. Her first click must not close the round with q2 at its default.
func TestTickingEachQuestionOfABlockAnswersBoth(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	require.Contains(t, block, "Tick one box per question")

	click1 := strings.Replace(block, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	require.NotEqual(t, block, click1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click1}})
	b.advance()
	click2 := strings.Replace(click1, "- [ ] **b. Without a header**", "- [x] **b. Without a header**", 1)
	require.NotEqual(t, click1, click2)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click2}})
	b.advance()

	body := b.fake.IssueBody(b.ref)
	require.Contains(t, body, "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, body, "| q2. Header row? | b. Without a header | @alice |", "alice's second tick is her answer to q2")
}

// One click only, the other question left at its default: the round waits TickQuiet for a
// next click, then closes with the click and the default; before that nothing is answered.
func TestOneTickOfSeveralQuestionsClosesAfterTheQuietTime(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	click := strings.Replace(block, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click}})
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State, "a first click of two questions answers nothing yet")
	require.NotNil(t, mb.WakeAt)
	require.Equal(t, b.clock.Now().Add(mailbox.TickQuiet), *mb.WakeAt, "the mailbox wakes when the ticks close")

	b.clock.Add(mailbox.TickQuiet - time.Second)
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State, "not before the quiet time")
	b.clock.Add(time.Second)
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	body := b.fake.IssueBody(b.ref)
	require.Contains(t, body, "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, body, "| q2. Header row? | a. With a header | default |")
}

// A click, then a reply that answers the other question: both are the answer.
func TestATickThenAReplyAnswerTogether(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	click := strings.Replace(block, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click}})
	b.advance()
	b.deliver(comment("alice", "q2: b"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	body := b.fake.IssueBody(b.ref)
	require.Contains(t, body, "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, body, "| q2. Header row? | b. Without a header | @alice |")
}
