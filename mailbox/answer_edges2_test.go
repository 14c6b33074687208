package mailbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

func editQuestions() []phase.Question {
	return []phase.Question{
		{ID: "q1", Title: "Which separator?", Default: "a", Options: []phase.Option{
			{ID: "a", Label: "Comma"}, {ID: "b", Label: "Semicolon"}}},
		{ID: "q2", Title: "Header row?", Default: "b", Options: []phase.Option{
			{ID: "a", Label: "With a header"}, {ID: "b", Label: "Without a header"}}},
	}
}

// A numbered list of notes whose first line begins with an option's word is no answer, and its
// lines stay notes.
func TestNumberedNoteBeginningWithAnOptionIsNoAnswer(t *testing.T) {
	body := "Some thoughts before I decide:\n1. Comma separated files break in our German Excel\n2. We may need both"
	a := mailbox.ParseReply(body, editQuestions())
	require.Empty(t, a.Choices, "a numbered note answered a question")
	require.Contains(t, a.FreeText, "Comma separated files break in our German Excel", "the note line was dropped")
}

// "1. Semicolon is what finance uses": not wholly an option, so no answer; its words reach the
// agent.
func TestNumberedAnswerWithMoreWordsKeepsTheNote(t *testing.T) {
	a := mailbox.ParseReply("1. Semicolon is what finance uses", editQuestions())
	require.Contains(t, a.FreeText, "finance", "the words after the numbered answer were dropped")
}

// A quarter named in a note ("by Q2 - a hard deadline") does not answer q2 with the article "a".
func TestQuarterInANoteIsNoAnswerToQ2(t *testing.T) {
	a := mailbox.ParseReply("q1: b, we need it by Q2 - a hard deadline", editQuestions())
	require.Equal(t, "b", a.Choices["q1"])
	_, answered := a.Choices["q2"]
	require.False(t, answered, "the note's \"Q2 - a\" answered q2 with option a: %v", a.Choices)
}

// A click in a block of two questions, then "ok" (alice is done): the reply answers with the
// tick, and the other question takes its default.
func TestATickThenOkKeepsTheTick(t *testing.T) {
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
	b.deliver(comment("alice", "ok"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |",
		"alice's tick was dropped by her \"ok\"")
}

// A click on q2, then 50 s later a click that unticks q1's default (the first half of choosing
// another): the round does not close a minute after the first click with q1 unticked.
func TestAnUntickIsAClickToo(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	click1 := strings.Replace(block, "- [ ] **b. Without a header**", "- [x] **b. Without a header**", 1)
	require.NotEqual(t, block, click1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click1}})
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.clock.Add(50 * time.Second)
	click2 := strings.Replace(click1, "- [x] **a. Comma**", "- [ ] **a. Comma**", 1)
	require.NotEqual(t, click1, click2)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click2}})
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.clock.Add(15 * time.Second) // 65 s after the first click, 15 s after the last
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State,
		"the round closed 15 s after alice's last click, q1 unticked on the forge")
}

// alice ticks q1; bob (write) then replies "q2: b": each answer is credited to its author.
func TestTickOfOneAndReplyOfAnotherKeepTheirAuthors(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.fake.AddUser("bob")
	b.fake.SetAccess(repo, "bob", true)
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	click := strings.Replace(block, "- [ ] **b. Semicolon**", "- [x] **b. Semicolon**", 1)
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: "alice"},
		Comment: &forge.Comment{ID: id, Body: click}})
	b.advance()
	b.deliver(comment("bob", "q2: b"))
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |",
		"alice's tick is credited to bob")
}
