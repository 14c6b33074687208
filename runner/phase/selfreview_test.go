package phase_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/phase"
)

// The self_review contract: findings with a severity and a text, at a relative path (or none)
// and a line of it; no findings is a valid result, a summary is still required.
func TestValidateFindings(t *testing.T) {
	t.Parallel()
	in := phase.Input{Phase: phase.SelfReview}
	good := []phase.Finding{
		{Path: "report.py", Line: 12, Severity: phase.SeverityBlocking, Text: "No test covers an empty month."},
		{Path: "README.md", Severity: phase.SeverityWarning, Text: "Mention the export."},
		{Severity: phase.SeverityNote, Text: "The change as a whole."},
	}
	require.NoError(t, phase.ValidateResult(in, &phase.Result{Summary: "s", Findings: good}))
	require.NoError(t, phase.ValidateResult(in, &phase.Result{Summary: "nothing found"}))
	require.ErrorIs(t, phase.ValidateResult(in, &phase.Result{Findings: good}), phase.ErrInvalidResult, "no summary")
	for name, f := range map[string]phase.Finding{
		"no severity":      {Path: "a.go", Text: "t"},
		"unknown severity": {Path: "a.go", Severity: "critical", Text: "t"},
		"no text":          {Path: "a.go", Severity: phase.SeverityNote, Text: " "},
		"long text":        {Path: "a.go", Severity: phase.SeverityNote, Text: strings.Repeat("x", 2001)},
		"absolute":         {Path: "/etc/passwd", Severity: phase.SeverityNote, Text: "t"},
		"escape":           {Path: "../x", Severity: phase.SeverityNote, Text: "t"},
		"backtick":         {Path: "a`b", Severity: phase.SeverityNote, Text: "t"},
		"negative line":    {Path: "a.go", Line: -1, Severity: phase.SeverityNote, Text: "t"},
		"line, no path":    {Line: 3, Severity: phase.SeverityNote, Text: "t"},
	} {
		require.ErrorIs(t, phase.ValidateResult(in, &phase.Result{Summary: "s", Findings: append(good, f)}), phase.ErrInvalidResult, name)
	}
	many := make([]phase.Finding, 101)
	for i := range many {
		many[i] = phase.Finding{Severity: phase.SeverityNote, Text: "t"}
	}
	require.ErrorIs(t, phase.ValidateResult(in, &phase.Result{Summary: "s", Findings: many}), phase.ErrInvalidResult, "too many")
	require.True(t, phase.SelfReview.ReadOnly())
}
