package mailbox_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// editBlock delivers who's edit of the question block (comment id) to body.
func editBlock(b *bundle, who string, id int64, body string) {
	b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: who},
		Comment: &forge.Comment{ID: id, Body: body}})
}

// tick returns body with the box of the option label ticked.
func tick(t *testing.T, body, label string) string {
	t.Helper()
	out := strings.Replace(body, "- [ ] **"+label+"**", "- [x] **"+label+"**", 1)
	require.NotEqual(t, body, out, "tick %s", label)
	return out
}

// untick returns body with the box of the option label unticked.
func untick(t *testing.T, body, label string) string {
	t.Helper()
	out := strings.Replace(body, "- [x] **"+label+"**", "- [ ] **"+label+"**", 1)
	require.NotEqual(t, body, out, "untick %s", label)
	return out
}

// Single question: mallory (refused) ticks "bug". alice, the author, wants bug too: unticking
// the default so that bug alone is ticked is not her choice yet (the tick is mallory's), but
// unticking and ticking bug again is, and answers.
func TestAuthorCanTickTheOptionARefusedPersonTicked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingType, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	evil := tick(t, block, "b. bug")
	editBlock(b, "mallory", id, evil)
	require.Equal(t, mailbox.StateWaitingType, b.advance().State)
	mine := untick(t, evil, "c. analysis") // bug alone ticked
	editBlock(b, "alice", id, mine)
	b.advance()
	off := untick(t, mine, "b. bug") // nothing ticked
	editBlock(b, "alice", id, off)
	b.advance()
	editBlock(b, "alice", id, mine) // bug ticked again, by alice herself
	mb := b.advance()
	require.Equal(t, "bug", mb.Type, "alice's own ticks of bug never answer the type question")
}

// Two questions: alice ticks q1 b, unticks the default a (b alone), then goes back to a: she
// unticks b (q1 has no box for a moment) and re-ticks a. The same undo as
// TestTickUndoneStillClosesAfterTheQuietTime, other click order: the round must close a
// minute after her last click, not wait for the deadline.
func TestUndoThroughAnEmptyQuestionStillClosesAfterTheQuietTime(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	s1 := tick(t, block, "b. Semicolon")
	editBlock(b, "alice", id, s1)
	b.advance()
	s2 := untick(t, s1, "a. Comma")
	editBlock(b, "alice", id, s2)
	b.advance()
	s3 := untick(t, s2, "b. Semicolon")
	editBlock(b, "alice", id, s3)
	b.advance()
	s4 := tick(t, s3, "a. Comma")
	require.Equal(t, block, s4)
	editBlock(b, "alice", id, s4)
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingInfo, mb.State)
	b.clock.Add(mailbox.TickQuiet)
	mb = b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State,
		"the last click left every question ticked; the round waits for the deadline instead of closing a minute later")
}

// q1 has three options. alice unticks the default a and ticks b (b alone), then ticks c on the
// way from b to c (b and c ticked, a not): that is no choice, and the round does not close
// with a (which nobody ticked again) in her name.
func TestTwoOptionsTickedIsNotTheDefault(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.results["analysis.functional"].Questions = []phase.Question{
		{ID: "q1", Title: "Which separator?", Default: "a", Options: []phase.Option{
			{ID: "a", Label: "Comma"}, {ID: "b", Label: "Semicolon"}, {ID: "c", Label: "Tab"}}},
		{ID: "q2", Title: "Header row?", Default: "a", Options: []phase.Option{
			{ID: "a", Label: "With a header"}, {ID: "b", Label: "Without a header"}}},
	}
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	s1 := untick(t, block, "a. Comma")
	editBlock(b, "alice", id, s1)
	b.advance()
	s2 := tick(t, s1, "b. Semicolon")
	editBlock(b, "alice", id, s2)
	b.advance()
	s3 := tick(t, s2, "c. Tab") // b and c ticked, a not
	editBlock(b, "alice", id, s3)
	b.advance()
	b.clock.Add(mailbox.TickQuiet)
	b.advance()
	require.NotContains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | a. Comma | @alice |",
		"alice never ticked Comma back, yet it is recorded as her choice")
}
