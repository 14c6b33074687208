package runner_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

func TestUsageDelta(t *testing.T) {
	t.Parallel()
	s := "44444444-2222-4333-8444-555555555555"
	run1 := phase.Result{SessionID: s, InputTokens: 120, OutputTokens: 9, CostUSD: 0.000495}
	run2 := phase.Result{SessionID: s, InputTokens: 240, OutputTokens: 18, CostUSD: 0.00099}
	for name, tc := range map[string]struct {
		prev, cur  phase.Result
		cumulative bool
		in, out    int64
		cost       float64
	}{
		// spec/agents.md §1 Output: total_cost_usd 0.000495 → 0.00099 after one resume.
		"cumulative after resume": {run1, run2, true, 120, 9, 0.000495},
		"per-run counters":        {run1, run2, false, 240, 18, 0.00099},
		"first run (no prev)":     {phase.Result{}, run1, true, 120, 9, 0.000495},
		"other session":           {run1, phase.Result{SessionID: "other", InputTokens: 5, OutputTokens: 1, CostUSD: 0.1}, true, 5, 1, 0.1},
		"counters restarted":      {run2, run1, true, 120, 9, 0.000495},
		"no cost reported":        {phase.Result{SessionID: s, InputTokens: 120}, phase.Result{SessionID: s, InputTokens: 360}, true, 240, 0, 0},
		// What a run reports is hostile: a negative figure (a forged stream event) counts as none.
		"negative reported":             {phase.Result{}, phase.Result{SessionID: s, InputTokens: -500, OutputTokens: -1, CostUSD: -5}, false, 0, 0, 0},
		"negative after resume":         {run1, phase.Result{SessionID: s, InputTokens: -500, OutputTokens: 18, CostUSD: -5}, true, 0, 18, 0},
		"negative cost, tokens counted": {run1, phase.Result{SessionID: s, InputTokens: 240, OutputTokens: 18, CostUSD: -5}, true, 240, 18, 0},
	} {
		in, out, cost := runner.UsageDelta(tc.prev, tc.cur, tc.cumulative)
		require.Equal(t, tc.in, in, name)
		require.Equal(t, tc.out, out, name)
		require.InDelta(t, tc.cost, cost, 1e-12, name)
	}
}
