package phase_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/phase"
)

func TestValidateResult(t *testing.T) {
	t.Parallel()
	functional := phase.Input{Phase: phase.Analysis, Step: phase.StepFunctional}
	q := func(def string, opts ...string) phase.Question {
		qq := phase.Question{ID: "q1", Title: "T", Default: def}
		for _, o := range opts {
			qq.Options = append(qq.Options, phase.Option{ID: o, Label: "L" + o})
		}
		return qq
	}
	for name, tc := range map[string]struct {
		in  phase.Input
		r   *phase.Result
		bad bool
	}{
		"nil":              {functional, nil, true},
		"functional ok":    {functional, &phase.Result{Summary: "s", Understanding: "u", Questions: []phase.Question{q("a", "a", "b")}}, false},
		"no understanding": {functional, &phase.Result{Summary: "s"}, true},
		"no summary":       {functional, &phase.Result{Understanding: "u"}, true},
		"one option":       {functional, &phase.Result{Summary: "s", Understanding: "u", Questions: []phase.Question{q("a", "a")}}, true},
		"five options":     {functional, &phase.Result{Summary: "s", Understanding: "u", Questions: []phase.Question{q("a", "a", "b", "c", "d", "e")}}, true},
		"bad default":      {functional, &phase.Result{Summary: "s", Understanding: "u", Questions: []phase.Question{q("z", "a", "b")}}, true},
		"duplicate option": {functional, &phase.Result{Summary: "s", Understanding: "u", Questions: []phase.Question{q("a", "a", "a")}}, true},
		"duplicate label": {functional, &phase.Result{Summary: "s", Understanding: "u", Questions: []phase.Question{{ID: "q1", Title: "T", Default: "a",
			Options: []phase.Option{{ID: "a", Label: "Comma"}, {ID: "b", Label: " comma"}}}}}, true},
		"duplicate question":  {functional, &phase.Result{Summary: "s", Understanding: "u", Questions: []phase.Question{q("a", "a", "b"), q("a", "a", "b")}}, true},
		"technical ok":        {phase.Input{Phase: phase.Analysis, Step: phase.StepTechnical}, &phase.Result{Summary: "s", Plan: "p"}, false},
		"technical no plan":   {phase.Input{Phase: phase.Analysis, Step: phase.StepTechnical}, &phase.Result{Summary: "s"}, true},
		"analysis no step":    {phase.Input{Phase: phase.Analysis}, &phase.Result{Summary: "s", Plan: "p"}, true},
		"answer ok":           {phase.Input{Phase: phase.Answer}, &phase.Result{Summary: "s", Answer: "a"}, false},
		"answer missing":      {phase.Input{Phase: phase.Answer}, &phase.Result{Summary: "s"}, true},
		"development ok":      {phase.Input{Phase: phase.Development}, &phase.Result{Summary: "s", CommitMessage: "m"}, false},
		"development no msg":  {phase.Input{Phase: phase.Development}, &phase.Result{Summary: "s"}, true},
		"ci_fix without msg":  {phase.Input{Phase: phase.CIFix}, &phase.Result{Summary: "s"}, false},
		"review summary only": {phase.Input{Phase: phase.Review}, &phase.Result{Summary: "s"}, false},
	} {
		err := phase.ValidateResult(tc.in, tc.r)
		if tc.bad {
			require.ErrorIs(t, err, phase.ErrInvalidResult, name)
		} else {
			require.NoError(t, err, name)
		}
	}
}
