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

// "+1" accepts the defaults (acceptWords, spec "ok/defaults/👍"): to the type question, whose
// default is analysis, it must not choose its first option, task.
func TestPlusOneToTheTypeQuestionTakesTheDefault(t *testing.T) {
	t.Parallel()
	b := setup(t) // no type label: the type question, default analysis
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingType, b.advance().State)
	b.deliver(comment("alice", "+1"))
	mb := b.advance()
	require.Equal(t, "analysis", mb.Type, "+1 takes the default")
}

// "1: b" to the one open question is "question 1: option b", never option 1.
func TestNumberedAnswerToTheTypeQuestion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingType, b.advance().State)
	b.deliver(comment("alice", "1: b"))
	mb := b.advance()
	require.NotEqual(t, "task", mb.Type, "alice wrote b, not option 1")
}

// A Markdown numbered list is how people answer numbered questions: "1. Semicolon" to the
// one question "q1. Which separator?" is Semicolon, never the first option, Comma.
func TestNumberedListAnswerToOneQuestion(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.deliver(comment("alice", "1. Semicolon"))
	b.advance()
	require.NotContains(t, b.fake.IssueBody(b.ref), "| q1. Which separator? | a. Comma | @alice |",
		"alice wrote Semicolon")
}

// "q1 - b" answers q1 on a line of its own; two such answers on one line, separated by a
// comma ("q1: b, q2: a" is), must not lose the second and apply q2's default in alice's name.
func TestSecondAnswerOnALineIsNotLost(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	twoQuestions(b)
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.deliver(comment("alice", "q1 - b, q2 - b"))
	b.advance()
	require.NotContains(t, b.fake.IssueBody(b.ref), "| q2. Header row? | a. With a header | default |",
		"alice answered q2 with b")
}

// 👍 accepts the defaults; on GitLab (and Forgejo) the emoji picker and autocomplete write it
// as a shortcode, ":thumbsup:" / ":+1:", which the forge renders as 👍.
func TestThumbsUpShortcodeAcceptsTheDefaults(t *testing.T) {
	t.Parallel()
	for _, reply := range []string{":thumbsup:", ":+1:"} {
		t.Run(reply, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "type::task")
			b.deliver(assign("alice"))
			require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
			b.deliver(comment("alice", reply))
			require.NotEqual(t, mailbox.StateWaitingInfo, b.advance().State, "👍 as the forge writes it")
		})
	}
}

// German "agreed" accepts the defaults, as "agreed", "d'accord" and "ok pour moi" do.
func TestEinverstandenAcceptsTheDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
	b.deliver(comment("alice", "Einverstanden."))
	require.NotEqual(t, mailbox.StateWaitingInfo, b.advance().State)
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
}

// "Other text is handed to the agent as notes": the reason or request a human writes after
// the answer on the same line is not dropped.
func TestTextAfterAnAnswerOnItsLineIsKeptAsNotes(t *testing.T) {
	t.Parallel()
	for _, reply := range []string{"q1: b, and please also add a BOM for Excel", "Semicolon, and please also add a BOM for Excel"} {
		t.Run(reply, func(t *testing.T) {
			t.Parallel()
			b := setup(t, "type::task")
			b.deliver(assign("alice"))
			require.Equal(t, mailbox.StateWaitingInfo, b.advance().State)
			b.deliver(comment("alice", reply))
			mb := b.advance()
			require.Equal(t, mailbox.StateWaitingValidation, mb.State)
			require.Contains(t, mb.Data.FreeText, "BOM", "alice's request reaches the agent")
		})
	}
}
