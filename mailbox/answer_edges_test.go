package mailbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
)

// twoQuestions makes the functional analysis ask two questions.
func twoQuestions(b *bundle) {
	b.exec.results["analysis.functional"].Questions = []phase.Question{
		{ID: "q1", Title: "Which separator?", Default: "a", Options: []phase.Option{
			{ID: "a", Label: "Comma"}, {ID: "b", Label: "Semicolon"}}},
		{ID: "q2", Title: "Header row?", Default: "a", Options: []phase.Option{
			{ID: "a", Label: "With a header"}, {ID: "b", Label: "Without a header"}}},
	}
}

// Replies as people write them, each to the questions it answers, through a whole pass: "+1"
// and the forges' 👍 shortcodes accept the defaults (never option 1), "1: b" and "1. Semicolon"
// name the question by its number, two answers on a line with dashes both count, German
// "Einverstanden" accepts, and the words after an answer reach the agent as notes.
func TestRepliesAnswerAsWritten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		labels []string // none: the type question (default analysis); type::task: the separator question
		two    bool     // the functional analysis asks twoQuestions
		reply  string
		check  func(t *testing.T, b *bundle, mb *mailbox.Mailbox)
	}{
		{name: "+1 takes the default", reply: "+1", check: func(t *testing.T, _ *bundle, mb *mailbox.Mailbox) {
			require.Equal(t, "analysis", mb.Type, "+1 takes the default, not the first option")
		}},
		{name: "a numbered answer", reply: "1: b", check: func(t *testing.T, _ *bundle, mb *mailbox.Mailbox) {
			require.Equal(t, "bug", mb.Type, "alice wrote b, not option 1")
		}},
		{name: "a numbered list's answer", labels: []string{"type::task"}, reply: "1. Semicolon",
			check: func(t *testing.T, b *bundle, _ *mailbox.Mailbox) {
				require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |", "alice wrote Semicolon")
			}},
		{name: "two answers with dashes", labels: []string{"type::task"}, two: true, reply: "q1 - b, q2 - b",
			check: func(t *testing.T, b *bundle, _ *mailbox.Mailbox) {
				require.Contains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | b. Semicolon | @alice |")
				require.Contains(t, b.fake.IssueBody(b.ref), "| q2. Header row? | b. Without a header | @alice |", "alice answered q2 with b")
			}},
		{name: ":thumbsup:", labels: []string{"type::task"}, reply: ":thumbsup:", check: accepted},
		{name: ":+1:", labels: []string{"type::task"}, reply: ":+1:", check: accepted},
		{name: "Einverstanden", labels: []string{"type::task"}, reply: "Einverstanden.", check: accepted},
		{name: "words after q1: b", labels: []string{"type::task"}, reply: "q1: b, and please also add a BOM for Excel", check: keptAsNotes},
		{name: "words after an option", labels: []string{"type::task"}, reply: "Semicolon, and please also add a BOM for Excel", check: keptAsNotes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tc.labels...)
			if tc.two {
				twoQuestions(b)
			}
			b.deliver(assign("alice"))
			asked := b.advance().State
			require.Contains(t, []mailbox.State{mailbox.StateWaitingType, mailbox.StateWaitingInfo}, asked)
			b.deliver(comment("alice", tc.reply))
			tc.check(t, b, b.advance())
		})
	}
}

// accepted checks that the reply closed the question round.
func accepted(t *testing.T, _ *bundle, mb *mailbox.Mailbox) {
	require.Equal(t, mailbox.StateWaitingValidation, mb.State, "the reply accepts the defaults")
}

// keptAsNotes checks that the reply answered and its request reached the agent's notes.
func keptAsNotes(t *testing.T, _ *bundle, mb *mailbox.Mailbox) {
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	require.Contains(t, mb.Data.FreeText, "BOM", "alice's request reaches the agent")
}

// A deadline under a minute is said to the second, rounded up ("never earlier than the real
// one"): the defaults must then not apply before the time the block announced, nor the
// "No answer by <time>" comment be posted before that time.
func TestDefaultsNotAppliedBeforeTheAnnouncedSecond(t *testing.T) {
	t.Parallel()
	b := setupWith(t, guard{config: mailbox.Config{QuestionDeadline: 1500 * time.Millisecond}}, "type::task")
	b.deliver(assign("alice")) // asked at 10:00:00.000
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	require.Contains(t, b.lastComment(), "Without an answer by 2026-11-29 10:00:02 UTC")
	b.clock.Add(1500 * time.Millisecond) // 10:00:01.5, before the announced 10:00:02
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State, "the block said 10:00:02")
	require.NotContains(t, b.lastComment(), "No answer by")
	b.clock.Add(500 * time.Millisecond)
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State, "the defaults apply at the announced second")
}
