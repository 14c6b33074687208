package runner_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
)

func TestValidateResult(t *testing.T) {
	t.Parallel()
	functional := runner.Input{Phase: runner.PhaseAnalysis, Step: runner.StepFunctional}
	q := func(def string, opts ...string) runner.Question {
		qq := runner.Question{ID: "q1", Title: "T", Default: def}
		for _, o := range opts {
			qq.Options = append(qq.Options, runner.Option{ID: o, Label: "L" + o})
		}
		return qq
	}
	for name, tc := range map[string]struct {
		in  runner.Input
		r   *runner.Result
		bad bool
	}{
		"nil":                 {functional, nil, true},
		"functional ok":       {functional, &runner.Result{Summary: "s", Understanding: "u", Questions: []runner.Question{q("a", "a", "b")}}, false},
		"no understanding":    {functional, &runner.Result{Summary: "s"}, true},
		"no summary":          {functional, &runner.Result{Understanding: "u"}, true},
		"one option":          {functional, &runner.Result{Summary: "s", Understanding: "u", Questions: []runner.Question{q("a", "a")}}, true},
		"five options":        {functional, &runner.Result{Summary: "s", Understanding: "u", Questions: []runner.Question{q("a", "a", "b", "c", "d", "e")}}, true},
		"bad default":         {functional, &runner.Result{Summary: "s", Understanding: "u", Questions: []runner.Question{q("z", "a", "b")}}, true},
		"duplicate option":    {functional, &runner.Result{Summary: "s", Understanding: "u", Questions: []runner.Question{q("a", "a", "a")}}, true},
		"duplicate question":  {functional, &runner.Result{Summary: "s", Understanding: "u", Questions: []runner.Question{q("a", "a", "b"), q("a", "a", "b")}}, true},
		"technical ok":        {runner.Input{Phase: runner.PhaseAnalysis, Step: runner.StepTechnical}, &runner.Result{Summary: "s", Plan: "p"}, false},
		"technical no plan":   {runner.Input{Phase: runner.PhaseAnalysis, Step: runner.StepTechnical}, &runner.Result{Summary: "s"}, true},
		"analysis no step":    {runner.Input{Phase: runner.PhaseAnalysis}, &runner.Result{Summary: "s", Plan: "p"}, true},
		"answer ok":           {runner.Input{Phase: runner.PhaseAnswer}, &runner.Result{Summary: "s", Answer: "a"}, false},
		"answer missing":      {runner.Input{Phase: runner.PhaseAnswer}, &runner.Result{Summary: "s"}, true},
		"development ok":      {runner.Input{Phase: runner.PhaseDevelopment}, &runner.Result{Summary: "s", CommitMessage: "m"}, false},
		"development no msg":  {runner.Input{Phase: runner.PhaseDevelopment}, &runner.Result{Summary: "s"}, true},
		"ci_fix without msg":  {runner.Input{Phase: runner.PhaseCIFix}, &runner.Result{Summary: "s"}, false},
		"review summary only": {runner.Input{Phase: runner.PhaseReview}, &runner.Result{Summary: "s"}, false},
	} {
		err := runner.ValidateResult(tc.in, tc.r)
		if tc.bad {
			require.ErrorIs(t, err, runner.ErrInvalidResult, name)
		} else {
			require.NoError(t, err, name)
		}
	}
}
