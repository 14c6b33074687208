package mailbox_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Three answers on a line, the first two split by a space alone, the third by a comma: each of
// the three is an answer (spec/lifecycle.md: "q1: b, q2: a" and "q1: b q2: a" both split).
func TestSpaceThenCommaKeepsTheMiddleAnswer(t *testing.T) {
	qs := append(editQuestions(), phase.Question{ID: "q3", Title: "Encoding?", Default: "a",
		Options: []phase.Option{{ID: "a", Label: "UTF-8"}, {ID: "b", Label: "Latin-1"}}})
	a := mailbox.ParseReply("q1: b q2: a, q3: b", qs)
	require.Equal(t, map[string]string{"q1": "b", "q2": "a", "q3": "b"}, a.Choices, "free text: %q", a.FreeText)
}
