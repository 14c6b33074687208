package mailbox

import (
	"testing"

	"github.com/alfred-bot/alfred/runner/phase"
)

// The Self-review section while its round runs, when nothing was found, and before the first
// reading, in one golden file (the section after a round and after a failure are golden files
// of the machine's tests).
func TestRenderSelfReviewGolden(t *testing.T) {
	t.Parallel()
	head := "3d9a62e3c0ffee00000000000000000000000000"
	fixing := &SelfReview{Pending: true, Head: head, Rounds: 1, Fixing: true, Summary: "Read the diff.",
		Findings: []SelfFinding{
			{Finding: phase.Finding{Path: "report.py", Line: 12, Severity: phase.SeverityBlocking, Text: "No test\ncovers an empty month."}},
			{Finding: phase.Finding{Path: "README.md", Severity: phase.SeverityNote, Text: "Mention the export."}},
		}}
	clean := &SelfReview{Head: head, Summary: "Nothing to report."}
	reading := &SelfReview{Pending: true}
	golden(t, "self_review_render.md", renderSelfReview(fixing, 2)+"\n---\n\n"+renderSelfReview(clean, 1)+"\n---\n\n"+renderSelfReview(reading, 1))
}
