package phase_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/phase"
)

func TestValidateReviewFixOutcomes(t *testing.T) {
	t.Parallel()
	in := phase.Input{Phase: phase.ReviewFix, Review: &phase.ReviewInput{Comments: []phase.ThreadComment{
		{ID: 3, Path: "report.py", Line: 7, Body: "Add a currency column."},
		{ID: 6, Path: "report.py", Line: 5, Body: "Why no encoding?"},
	}}}
	ok := []phase.CommentOutcome{{ID: 3, Outcome: phase.OutcomeFixed}, {ID: 6, Outcome: phase.OutcomeAnswered, Reply: "Because…"}}
	for name, tc := range map[string]struct {
		r    *phase.Result
		want string // "" is valid
	}{
		"fixed and answered":           {&phase.Result{Summary: "s", CommitMessage: "m", Comments: ok}, ""},
		"fixed without commit message": {&phase.Result{Summary: "s", Comments: ok}, "commit_message"},
		"only answers need no commit message": {&phase.Result{Summary: "s", Comments: []phase.CommentOutcome{
			{ID: 3, Outcome: phase.OutcomeDeclined, Reason: "out of scope"}, {ID: 6, Outcome: phase.OutcomeAnswered, Reply: "r"}}}, ""},
		"missing outcome": {&phase.Result{Summary: "s", CommitMessage: "m", Comments: ok[:1]}, "comment 6 has no outcome"},
		"unknown id": {&phase.Result{Summary: "s", CommitMessage: "m", Comments: append(ok, phase.CommentOutcome{ID: 99, Outcome: phase.OutcomeFixed})},
			"id 99 is not a comment"},
		"twice": {&phase.Result{Summary: "s", CommitMessage: "m", Comments: append(ok, ok[0])}, "second outcome"},
		"answer without reply": {&phase.Result{Summary: "s", CommitMessage: "m", Comments: []phase.CommentOutcome{
			ok[0], {ID: 6, Outcome: phase.OutcomeAnswered}}}, "needs a reply"},
		"decline without reason": {&phase.Result{Summary: "s", CommitMessage: "m", Comments: []phase.CommentOutcome{
			ok[0], {ID: 6, Outcome: phase.OutcomeDeclined}}}, "needs a reason"},
		"bad outcome": {&phase.Result{Summary: "s", CommitMessage: "m", Comments: []phase.CommentOutcome{
			ok[0], {ID: 6, Outcome: "ignored"}}}, "is not fixed, answered or declined"},
	} {
		err := phase.ValidateResult(in, tc.r)
		if tc.want == "" {
			require.NoError(t, err, name)
			continue
		}
		require.ErrorIs(t, err, phase.ErrInvalidResult, name)
		require.ErrorContains(t, err, tc.want, name)
	}
}

func TestValidateReviewNotes(t *testing.T) {
	t.Parallel()
	in := phase.Input{Phase: phase.Review}
	good := phase.ReviewNote{Path: "docs/report.md", Line: 3, Body: "Say which month."}
	require.NoError(t, phase.ValidateResult(in, &phase.Result{Summary: "s", ReviewComments: []phase.ReviewNote{good, {Path: "a.go", OldLine: 2, Body: "b"}}}))
	for name, n := range map[string]phase.ReviewNote{
		"no path":  {Line: 1, Body: "b"},
		"absolute": {Path: "/etc/passwd", Line: 1, Body: "b"},
		"escape":   {Path: "../x", Line: 1, Body: "b"},
		"no line":  {Path: "a.go", Body: "b"},
		"no body":  {Path: "a.go", Line: 1},
	} {
		require.ErrorIs(t, phase.ValidateResult(in, &phase.Result{Summary: "s", ReviewComments: []phase.ReviewNote{good, n}}), phase.ErrInvalidResult, name)
	}
	for _, v := range []string{phase.VerdictApprove, phase.VerdictRequestChanges} {
		require.NoError(t, phase.ValidateResult(in, &phase.Result{Summary: "s", ReviewVerdict: v}))
	}
	require.ErrorIs(t, phase.ValidateResult(in, &phase.Result{Summary: "s", ReviewVerdict: "merge"}), phase.ErrInvalidResult)
}
