package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MaxResultBytes bounds the result.json ReadResultFile accepts (1 MiB).
const MaxResultBytes = 1 << 20

// ReadResultFile reads <outDir>/result.json (the host side of /alfred/out/result.json) and
// validates it with ValidateResult. A missing file is ErrNoResult; a file over MaxResultBytes,
// bad JSON or a contract violation wraps ErrInvalidResult.
func ReadResultFile(in Input, outDir string) (*Result, error) {
	f, err := os.Open(filepath.Join(outDir, ResultFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoResult
	}
	if err != nil {
		return nil, fmt.Errorf("open result: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxResultBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	if len(data) > MaxResultBytes {
		return nil, fmt.Errorf("%w: %s larger than %d bytes", ErrInvalidResult, ResultFile, MaxResultBytes)
	}
	return DecodeResult(in, data)
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
//   - answer: Answer is set.
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
	case PhaseAnalysis:
		switch in.Step {
		case StepFunctional:
			need(!blank(r.Understanding), "understanding")
		case StepTechnical:
			need(!blank(r.Plan), "plan")
		default:
			errs = append(errs, fmt.Errorf("analysis: unknown step %q", in.Step))
		}
	case PhaseDevelopment:
		need(!blank(r.CommitMessage), "commit_message")
	case PhaseAnswer:
		need(!blank(r.Answer), "answer")
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
	ids := map[string]bool{}
	for j, o := range q.Options {
		switch {
		case strings.TrimSpace(o.ID) == "":
			errs = append(errs, fmt.Errorf("%s.options[%d]: id is required", name, j))
		case ids[o.ID]:
			errs = append(errs, fmt.Errorf("%s.options[%d]: duplicate id %q", name, j, o.ID))
		}
		ids[o.ID] = true
		if strings.TrimSpace(o.Label) == "" {
			errs = append(errs, fmt.Errorf("%s.options[%d]: label is required", name, j))
		}
	}
	if !ids[q.Default] || q.Default == "" {
		errs = append(errs, fmt.Errorf("%s: default %q is not one of its option ids", name, q.Default))
	}
	return errs
}
