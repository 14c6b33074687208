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

// askTwo has the functional analysis ask alice the two questions of twoQuestions and returns
// the question block and its comment id.
func askTwo(t *testing.T, b *bundle) (string, int64) {
	t.Helper()
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	return b.lastComment(), b.lastCommentID()
}

// addWriter adds login to the fake forge with write access.
func addWriter(b *bundle, login string) {
	b.fake.AddUser(login)
	b.fake.SetAccess(repo, login, true)
}

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

// The block says "Tick one box per question": with two questions, alice ticks q1's b, then
// q2's b, one edit per click. Her first click must not close the round with q2 at its default.
func TestTickingEachQuestionOfABlockAnswersBoth(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	block, id := askTwo(t, b)
	require.Contains(t, block, "Tick one box per question")
	click1 := tick(t, block, "b. Semicolon")
	editBlock(b, "alice", id, click1)
	b.advance()
	editBlock(b, "alice", id, tick(t, click1, "b. Without a header"))
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
	block, id := askTwo(t, b)
	editBlock(b, "alice", id, tick(t, block, "b. Semicolon"))
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

// alice ticks q1's b, then unticks it again (back to the default, every question has a box
// ticked): a minute after her last click the round closes, not at the deadline.
func TestTickUndoneStillClosesAfterTheQuietTime(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	block, id := askTwo(t, b)
	editBlock(b, "alice", id, tick(t, block, "b. Semicolon"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.clock.Add(10 * time.Second)
	editBlock(b, "alice", id, block) // b unticked again: the default a stays
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.clock.Add(mailbox.TickQuiet)
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State,
		"the timeline said the questions close a minute after alice's last click; they wait for the deadline")
}

// The same undo in the other click order: alice ticks q1 b, unticks the default a (b alone),
// unticks b (q1 has no box for a moment) and ticks a again: the round closes a minute after
// her last click.
func TestUndoThroughAnEmptyQuestionStillClosesAfterTheQuietTime(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	block, id := askTwo(t, b)
	s := block
	for _, step := range []func(string) string{
		func(s string) string { return tick(t, s, "b. Semicolon") },
		func(s string) string { return untick(t, s, "a. Comma") },
		func(s string) string { return untick(t, s, "b. Semicolon") },
		func(s string) string { return tick(t, s, "a. Comma") },
	} {
		s = step(s)
		editBlock(b, "alice", id, s)
		require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	}
	require.Equal(t, block, s)
	b.clock.Add(mailbox.TickQuiet)
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State,
		"the last click left every question ticked; the round waits for the deadline instead of closing a minute later")
}

// A click on q2, then 50 s later a click that unticks q1's default (the first half of choosing
// another): the round does not close a minute after the first click with q1 unticked.
func TestAnUntickIsAClickToo(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	block, id := askTwo(t, b)
	click1 := tick(t, block, "b. Without a header")
	editBlock(b, "alice", id, click1)
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.clock.Add(50 * time.Second)
	editBlock(b, "alice", id, untick(t, click1, "a. Comma"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.clock.Add(15 * time.Second) // 65 s after the first click, 15 s after the last
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State,
		"the round closed 15 s after alice's last click, q1 unticked on the forge")
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
	s, id := b.lastComment(), b.lastCommentID()
	for _, step := range []func(string) string{
		func(s string) string { return untick(t, s, "a. Comma") },
		func(s string) string { return tick(t, s, "b. Semicolon") },
		func(s string) string { return tick(t, s, "c. Tab") }, // b and c ticked, a not
	} {
		s = step(s)
		editBlock(b, "alice", id, s)
		b.advance()
	}
	b.clock.Add(mailbox.TickQuiet)
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State, "two options ticked: no choice")
	require.NotContains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? |",
		"alice never ticked Comma back, yet it is recorded as her choice")
}

// A click, then a reply that answers the other question: both are the answer.
func TestATickThenAReplyAnswerTogether(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	block, id := askTwo(t, b)
	editBlock(b, "alice", id, tick(t, block, "b. Semicolon"))
	b.advance()
	b.deliver(comment("alice", "q2: b"))
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	body := b.fake.IssueBody(b.ref)
	require.Contains(t, body, "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, body, "| q2. Header row? | b. Without a header | @alice |")
}

// A click in a block of two questions, then "ok" (alice is done): the reply answers with the
// tick, and the other question takes its default.
func TestATickThenOkKeepsTheTick(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	block, id := askTwo(t, b)
	editBlock(b, "alice", id, tick(t, block, "b. Semicolon"))
	b.advance()
	b.deliver(comment("alice", "ok"))
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |",
		"alice's tick was dropped by her \"ok\"")
	require.Contains(t, b.fake.IssueBody(b.ref), "| q2. Header row? | a. With a header | default |")
}

// alice ticks q1; bob (write) then replies "q2: b": each answer is credited to its author.
func TestTickOfOneAndReplyOfAnotherKeepTheirAuthors(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	addWriter(b, "bob")
	block, id := askTwo(t, b)
	editBlock(b, "alice", id, tick(t, block, "b. Semicolon"))
	b.advance()
	b.deliver(comment("bob", "q2: b"))
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |",
		"alice's tick is credited to bob")
	require.Contains(t, b.fake.IssueBody(b.ref), "| q2. Header row? | b. Without a header | @bob |")
}

// alice ticks q1, bob (write) ticks q2: every question is ticked and the round closes at once,
// each tick credited to whoever clicked it, and the block's notice names both (as it does
// when the same ticks close after the quiet time), not only the last clicker.
func TestTickOfOneAndTickOfAnotherKeepTheirAuthors(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	addWriter(b, "bob")
	block, id := askTwo(t, b)
	click1 := tick(t, block, "b. Semicolon")
	editBlock(b, "alice", id, click1)
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	editBlock(b, "bob", id, tick(t, click1, "b. Without a header"))
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |",
		"alice's tick is credited to bob")
	var blockNow string
	for _, c := range b.fake.IssueComments(b.ref) {
		if c.ID == id {
			blockNow = c.Body
		}
	}
	require.Contains(t, blockNow, "Answered by @alice and @bob.")
	require.Contains(t, b.fake.IssueBody(b.ref), "| q2. Header row? | b. Without a header | @bob |")
}

// mallory (no write access, not the author) ticks q2 in the block: refused. alice (the author)
// then ticks q1: her edit carries mallory's tick too, and mallory's refused choice does not
// become the answer to q2 in alice's name.
func TestRefusedTickIsNotTakenWithALaterTick(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.fake.AddUser("mallory")
	block, id := askTwo(t, b)
	evil := tick(t, block, "b. Without a header")
	editBlock(b, "mallory", id, evil)
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	editBlock(b, "alice", id, tick(t, evil, "b. Semicolon"))
	b.advance()
	b.clock.Add(mailbox.TickQuiet)
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, b.fake.IssueBody(b.ref), "| q2. Header row? | a. With a header | default |",
		"mallory's refused tick answered q2")
}

// mallory's refused tick of q2, then alice's reply "q1: b": q2 keeps its default.
func TestReplyAfterARefusedTick(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	block, id := askTwo(t, b)
	editBlock(b, "mallory", id, tick(t, block, "b. Without a header"))
	b.advance()
	b.deliver(comment("alice", "q1: b"))
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	body := b.fake.IssueBody(b.ref)
	require.Contains(t, body, "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, body, "| q2. Header row? | a. With a header | default |")
}

// A single question (the type question): mallory (no write access) ticks "bug", refused.
// alice then unticks the default "analysis" (the first half of choosing another option): the
// refused tick does not become the answer in alice's name.
func TestRefusedTickOfASingleQuestionIsNotTakenWithALaterClick(t *testing.T) {
	t.Parallel()
	b := setup(t) // no type label: the type question, one question
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingType, b.advance().State)
	block, id := b.lastComment(), b.lastCommentID()
	evil := tick(t, block, "b. bug")
	editBlock(b, "mallory", id, evil)
	require.Equal(t, mailbox.StateWaitingType, b.advance().State)
	editBlock(b, "alice", id, untick(t, evil, "c. analysis"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingType, mb.State)
	require.Empty(t, mb.Type, "mallory's refused tick answered the type question in alice's name")
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
	editBlock(b, "alice", id, untick(t, mine, "b. bug")) // nothing ticked
	b.advance()
	editBlock(b, "alice", id, mine) // bug ticked again, by alice herself
	require.Equal(t, "bug", b.advance().Type, "alice's own ticks of bug never answer the type question")
}
