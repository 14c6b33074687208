package mailbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/phase"
)

// The question block reads back into what rendered it: intro, questions (an option's id is its
// label), defaults and deadline; an answered block is not open.
func TestParseBlockReadsBackTheRenderedBlock(t *testing.T) {
	qs := []phase.Question{
		{ID: "q1", Title: "Which separator?", Context: "The file is read by Excel.\n\nAnd by scripts.", Default: "b",
			Options: []phase.Option{{ID: "a", Label: "Comma", Description: "RFC 4180"}, {ID: "b", Label: "Semicolon"}}},
		{ID: "q2", Title: "Header row?", Default: "y", Options: []phase.Option{{ID: "y", Label: "Yes"}, {ID: "n", Label: "No — none"}}},
	}
	intro := understandingIntro + "> You want a CSV export.\n>\n> Monthly.\n\nBefore I go on, I need a few decisions from you."
	deadline := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	p, err := parseBlock(RenderQuestions(intro, qs, deadline))
	require.NoError(t, err)
	require.True(t, p.open)
	require.Equal(t, deadline, p.deadline)
	require.Equal(t, intro, p.intro)
	require.Equal(t, "You want a CSV export.\n\nMonthly.", p.understanding())
	require.Len(t, p.questions, 2)
	require.Equal(t, "The file is read by Excel.\n\nAnd by scripts.", p.questions[0].Context)
	require.Equal(t, "Semicolon", p.questions[0].Default)
	require.Equal(t, []phase.Option{{ID: "Comma", Label: "Comma", Description: "RFC 4180"}, {ID: "Semicolon", Label: "Semicolon"}},
		p.questions[0].Options)
	require.Equal(t, "No — none", p.questions[1].Options[1].Label)
	require.Equal(t, RenderQuestions(intro, qs, deadline), RenderQuestions(p.intro, p.questions, p.deadline),
		"rendered again, the block is the same text")

	answered, err := parseBlock(RenderAnswered(intro, qs, map[string]string{"q1": "a"}, "Answered by @alice."))
	require.NoError(t, err)
	require.False(t, answered.open)

	_, err = parseBlock("Thanks, I am on it.")
	require.Error(t, err)

	typeBlock, err := parseBlock(RenderQuestions("Before I start, tell me what kind of work this is.", []phase.Question{TypeQuestion()}, deadline))
	require.NoError(t, err)
	require.Equal(t, TypeQuestion().Title, typeBlock.questions[0].Title)
	require.Equal(t, TypeQuestion().Default, typeBlock.questions[0].Default, "the type question's ids are its labels")
}

func TestParseTheBotsComments(t *testing.T) {
	n, branch := parseMRComment("I opened pull request #12 from `agent/issue-3-csv`. https://forge.example/acme/shop/pulls/12")
	require.Equal(t, int64(12), n)
	require.Equal(t, "agent/issue-3-csv", branch)
	n, branch = parseMRComment("I opened merge request !7 from `agent/issue-1-x`.")
	require.Equal(t, int64(7), n)
	require.Equal(t, "agent/issue-1-x", branch)
	n, _ = parseMRComment("Thanks")
	require.Zero(t, n)

	require.Equal(t, "1. Add an endpoint.\n\n2. Add a button.",
		parsePlan("## Technical plan\n\n1. Add an endpoint.\n\n2. Add a button.\n\nAdd the `ai::validate_plan` label to let me start the development."))
	require.Equal(t, "alice", parseValidatedBy("Plan validated by @alice. Starting the development."))

	qs := []Question{{QID: "q1", Title: "Sep | arator?", OptionsJSON: `[{"id":"a","label":"Comma"},{"id":"b","label":"Semi | colon"}]`,
		Answer: ptr("b"), AnsweredBy: ptr("alice")}, {QID: "q2", Title: "Header?", OptionsJSON: `[{"id":"y","label":"Yes"}]`,
		Answer: ptr("y"), AnsweredBy: ptr("default")}}
	section := RenderAnalysis(&phase.Result{Understanding: "CSV"}, qs, "")
	require.Equal(t, map[string]string{"q1": "Semi | colon", "q2": "Yes"}, parseDecisions(section))
	require.Empty(t, parseDecisions("## Functional analysis\n\nNo questions."))

	for key, want := range map[string]bool{"retry-12": true, "held-3": true, "refused-4": true, "set-aside-9": true,
		"auto-merge-on-2": true, "refused-answers-1-bob": false, "refused-retry-b1-bob": false, "refused-assign-bob": false,
		"refused-review-3-bob": false, "ack-1": false} {
		require.Equal(t, want, eventKeyed(key), key)
	}
}

func ptr(s string) *string { return &s }
