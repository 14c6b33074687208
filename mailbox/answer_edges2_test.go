package mailbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
)

// editQuestions are two questions whose defaults differ (q2's is b).
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
	require.Empty(t, a.Choices)
	require.Contains(t, a.FreeText, "finance", "the words after the numbered answer were dropped")
}

// A quarter named in a note ("by Q2 - a hard deadline") does not answer q2 with the article "a".
func TestQuarterInANoteIsNoAnswerToQ2(t *testing.T) {
	a := mailbox.ParseReply("q1: b, we need it by Q2 - a hard deadline", editQuestions())
	require.Equal(t, "b", a.Choices["q1"])
	_, answered := a.Choices["q2"]
	require.False(t, answered, "the note's \"Q2 - a\" answered q2 with option a: %v", a.Choices)
}

// Three answers on a line, the first two split by a space alone, the third by a comma: each of
// the three is an answer ("q1: b, q2: a" and "q1: b q2: a" both split).
func TestSpaceThenCommaKeepsTheMiddleAnswer(t *testing.T) {
	qs := append(editQuestions(), phase.Question{ID: "q3", Title: "Encoding?", Default: "a",
		Options: []phase.Option{{ID: "a", Label: "UTF-8"}, {ID: "b", Label: "Latin-1"}}})
	a := mailbox.ParseReply("q1: b q2: a, q3: b", qs)
	require.Equal(t, map[string]string{"q1": "b", "q2": "a", "q3": "b"}, a.Choices, "free text: %q", a.FreeText)
}
