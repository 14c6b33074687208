package phase

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ResultFile is the name of the result file in the run's output directory
// (/alfred/out/result.json in the container).
const ResultFile = "result.json"

// MaxResultBytes bounds the result.json a runner accepts (1 MiB).
const MaxResultBytes = 1 << 20

// Errors of the result contract; match them with errors.Is.
var (
	// ErrNoResult: the agent wrote no result file (and its output held none either).
	ErrNoResult = errors.New("agent wrote no result")
	// ErrInvalidResult: the result does not satisfy the contract for the phase.
	ErrInvalidResult = errors.New("invalid agent result")
	// ErrDetach is the cause (context.WithCancelCause) with which a shutting-down process
	// cancels its runs: the runner leaves the container running and its worktree in place
	// (Outcome.Detached) instead of stopping it, and the next process reattaches to it.
	ErrDetach = errors.New("Alfred is shutting down: the run's container is left running and reattached after the restart")
)

// Result is the structured result every phase writes to /alfred/out/result.json. The contract
// is specified in spec/result-contract.md; Validate enforces it.
type Result struct {
	// Summary is a short human-readable account of the run (all phases).
	Summary string `json:"summary"`
	// Functional analysis.
	Understanding      string     `json:"understanding,omitempty"`
	Questions          []Question `json:"questions,omitempty"`
	ExpectedBehaviour  string     `json:"expected_behaviour,omitempty"`
	AcceptanceCriteria []string   `json:"acceptance_criteria,omitempty"`
	OutOfScope         []string   `json:"out_of_scope,omitempty"`
	// Technical analysis.
	Plan string `json:"plan,omitempty"`
	// Development, ci_fix, review_fix, conflict_resolution: the commit message Alfred uses.
	CommitMessage string `json:"commit_message,omitempty"`
	// Answer phase: the answer to post.
	Answer string `json:"answer,omitempty"`
	// Comments is the outcome of every comment a review_fix run got, one each.
	Comments []CommentOutcome `json:"comments,omitempty"`
	// ReviewComments are the inline comments of a review run; Summary is the review's body.
	ReviewComments []ReviewNote `json:"review_comments,omitempty"`
	// Findings are what a self_review run found in the bot's own merge request, one each.
	Findings []Finding `json:"findings,omitempty"`
	// ReviewVerdict is what a review run would conclude: VerdictApprove, VerdictRequestChanges,
	// or "" for a comment only. Alfred posts it only where the configuration allows verdicts.
	ReviewVerdict string `json:"review_verdict,omitempty"`

	// Filled by the adapter from the CLI's own output, not by the agent.
	SessionID    string  `json:"session_id,omitempty"`
	InputTokens  int64   `json:"input_tokens,omitempty"`
	OutputTokens int64   `json:"output_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd,omitempty"`
}

// DecodeResult parses a result JSON object and validates it with ValidateResult; errors wrap
// ErrInvalidResult.
func DecodeResult(in Input, data []byte) (*Result, error) {
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidResult, ResultFile, err)
	}
	if err := ValidateResult(in, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// ValidateResult checks r against the result contract for the run described by in, and returns
// an error wrapping ErrInvalidResult that lists every problem found (nil if none):
//
//   - every phase: r is not nil and Summary is not blank;
//   - analysis/functional: Understanding is set; each Question has a unique non-blank ID and a
//     Title, 2 to 4 Options with unique non-blank IDs and Labels, and a Default naming one of them;
//   - analysis/technical: Plan is set;
//   - analysis without a step: refused (the step selects the contract);
//   - development: CommitMessage is set;
//   - answer: Answer is set;
//   - review_fix: every comment of in.Review has exactly one outcome (fixed, answered or
//     declined) and no other id has one; answered needs a reply, declined a reason; a fixed
//     comment needs CommitMessage;
//   - review: each review comment has a path, a line (new or old side) and a body; a verdict
//     is approve or request_changes;
//   - self_review: each finding has a severity (blocking, warning or note) and a text, a path
//     that is relative and inside the repository when set, and no negative line; a line needs
//     a path.
//
// Questions are checked in whatever phase they appear.
func ValidateResult(in Input, r *Result) error {
	if r == nil {
		return fmt.Errorf("%w: no result", ErrInvalidResult)
	}
	var errs []error
	need := func(ok bool, field string) {
		if !ok {
			errs = append(errs, fmt.Errorf("%s %s: %q is required", in.Phase, in.Step, field))
		}
	}
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	need(!blank(r.Summary), "summary")
	switch in.Phase {
	case Analysis:
		switch in.Step {
		case StepFunctional:
			need(!blank(r.Understanding), "understanding")
		case StepTechnical:
			need(!blank(r.Plan), "plan")
		default:
			errs = append(errs, fmt.Errorf("analysis: unknown step %q", in.Step))
		}
	case Development:
		need(!blank(r.CommitMessage), "commit_message")
	case Answer:
		need(!blank(r.Answer), "answer")
	case ReviewFix:
		errs = append(errs, validateOutcomes(in, r)...)
	case SelfReview:
		errs = append(errs, validateFindings(r.Findings)...)
	case Review:
		errs = append(errs, validateReviewNotes(r.ReviewComments)...)
		if v := r.ReviewVerdict; v != "" && v != VerdictApprove && v != VerdictRequestChanges {
			errs = append(errs, fmt.Errorf("review: review_verdict %q is not approve or request_changes", v))
		}
	}
	seen := map[string]bool{}
	for i, q := range r.Questions {
		errs = append(errs, validateQuestion(i, q, seen)...)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidResult, errors.Join(errs...))
}

func validateQuestion(i int, q Question, seen map[string]bool) []error {
	var errs []error
	name := fmt.Sprintf("questions[%d]", i)
	if strings.TrimSpace(q.ID) == "" {
		errs = append(errs, fmt.Errorf("%s: id is required", name))
	} else if seen[q.ID] {
		errs = append(errs, fmt.Errorf("%s: duplicate id %q", name, q.ID))
	}
	seen[q.ID] = true
	if strings.TrimSpace(q.Title) == "" {
		errs = append(errs, fmt.Errorf("%s: title is required", name))
	}
	if n := len(q.Options); n < 2 || n > 4 {
		errs = append(errs, fmt.Errorf("%s: has %d options, want 2 to 4", name, n))
	}
	ids, labels := map[string]bool{}, map[string]bool{}
	for j, o := range q.Options {
		switch {
		case strings.TrimSpace(o.ID) == "":
			errs = append(errs, fmt.Errorf("%s.options[%d]: id is required", name, j))
		case ids[o.ID]:
			errs = append(errs, fmt.Errorf("%s.options[%d]: duplicate id %q", name, j, o.ID))
		}
		ids[o.ID] = true
		label := strings.ToLower(strings.TrimSpace(o.Label))
		switch {
		case label == "":
			errs = append(errs, fmt.Errorf("%s.options[%d]: label is required", name, j))
		case labels[label]:
			// A reply naming it could not tell the two apart.
			errs = append(errs, fmt.Errorf("%s.options[%d]: duplicate label %q", name, j, o.Label))
		}
		labels[label] = true
	}
	if !ids[q.Default] || q.Default == "" {
		errs = append(errs, fmt.Errorf("%s: default %q is not one of its option ids", name, q.Default))
	}
	return errs
}
