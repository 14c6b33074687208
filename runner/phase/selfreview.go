package phase

import (
	"fmt"
	"strings"
)

// Severities of a Finding.
const (
	// SeverityBlocking: the merge request should not reach a human as it is (a missing test, a
	// change outside the plan, a broken convention of the repository); it goes to a review_fix
	// round while self_review.max_rounds allows.
	SeverityBlocking = "blocking"
	// SeverityWarning: worth a human's look; listed, not fixed.
	SeverityWarning = "warning"
	// SeverityNote: a remark; listed, not fixed.
	SeverityNote = "note"
)

// Finding is one thing a self_review run found in the bot's merge request: at Path and Line of
// the new file (Line 0 for the file as a whole; Path "" for the change as a whole), how serious
// it is (SeverityBlocking, SeverityWarning, SeverityNote) and what it is.
type Finding struct {
	Path     string `json:"path,omitempty"`
	Line     int    `json:"line,omitempty"`
	Severity string `json:"severity"`
	Text     string `json:"text"`
}

// Blocking reports whether f is to be fixed before a human reviews.
func (f Finding) Blocking() bool { return f.Severity == SeverityBlocking }

// GuidelineFiles are the files of a repository a self_review run reads as the repository's own
// guidelines when they exist, in this order (the agents' instruction files, the contribution
// guides, the editor settings).
var GuidelineFiles = []string{"CONTRIBUTING.md", ".github/CONTRIBUTING.md", "docs/CONTRIBUTING.md",
	"AGENTS.md", "CLAUDE.md", "GEMINI.md", ".github/copilot-instructions.md", "CODING_STYLE.md",
	"STYLE.md", ".editorconfig"}

// maxFindingText bounds the text of one finding (the description section lists them).
const maxFindingText = 2000

// maxFindings bounds the findings of one self_review run.
const maxFindings = 100

func validateFindings(fs []Finding) []error {
	var errs []error
	if len(fs) > maxFindings {
		errs = append(errs, fmt.Errorf("self_review: %d findings, at most %d", len(fs), maxFindings))
	}
	for i, f := range fs {
		name := fmt.Sprintf("findings[%d]", i)
		switch f.Severity {
		case SeverityBlocking, SeverityWarning, SeverityNote:
		default:
			errs = append(errs, fmt.Errorf("%s: severity %q is not blocking, warning or note", name, f.Severity))
		}
		if strings.TrimSpace(f.Text) == "" {
			errs = append(errs, fmt.Errorf("%s: text is required", name))
		} else if len(f.Text) > maxFindingText {
			errs = append(errs, fmt.Errorf("%s: text is %d bytes, at most %d", name, len(f.Text), maxFindingText))
		}
		if f.Path != "" && (strings.HasPrefix(f.Path, "/") || strings.Contains(f.Path, "..") || strings.ContainsAny(f.Path, "\n\r`")) {
			errs = append(errs, fmt.Errorf("%s: path %q is not a relative path in the repository", name, f.Path))
		}
		if f.Line < 0 {
			errs = append(errs, fmt.Errorf("%s: line %d is negative", name, f.Line))
		} else if f.Line > 0 && f.Path == "" {
			errs = append(errs, fmt.Errorf("%s: a line needs a path", name))
		}
	}
	return errs
}
