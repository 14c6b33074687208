package mailbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRenderProgressFinished(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	budget := 5.0
	p := Progress{Done: true, Started: t0, Now: t0.Add(95 * time.Minute), BudgetUSD: &budget, Runs: []ProgressRun{
		{Phase: "analysis", Duration: 41 * time.Second, TokensIn: 1200, TokensOut: 300, CostUSD: 0.0123, Rated: true},
		{Phase: "analysis", Duration: 65 * time.Second, TokensIn: 900, TokensOut: 410, CostUSD: 0.0101, Rated: true},
		{Phase: "development", Duration: 12 * time.Minute, TokensIn: 15000, TokensOut: 4200, CostUSD: 0.2511, Rated: true},
		{Phase: "ci_fix", Duration: 3 * time.Minute, TokensIn: 3000, TokensOut: 800},
	}}
	golden(t, "progress_finished.md", RenderProgress(p))
}

func TestRenderProgressRunningAndQueued(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	p := Progress{Phase: "development", Running: true, Since: t0.Add(2 * time.Minute), Started: t0, Now: t0.Add(9 * time.Minute),
		Runs: []ProgressRun{{Phase: "analysis", Duration: time.Minute, TokensIn: 10, TokensOut: 5}}}
	got := RenderProgress(p)
	require.Contains(t, got, "**Running:** development for 7m · 9m since the first run")
	require.Contains(t, got, "| analysis | 1 | 1m0s | 10 | 5 | unrated |")
	require.NotContains(t, got, "free")
	require.NotContains(t, got, "$0.0000")

	p.Running = false
	require.Contains(t, RenderProgress(p), "**Queued:** development, waiting 7m")
	require.Contains(t, RenderProgress(Progress{Now: t0}), "No run has finished yet.")
}

func TestBudget(t *testing.T) {
	t.Parallel()
	b := 0.01
	ok, reason := Budget(0, &b, false)
	require.True(t, ok)
	require.Empty(t, reason)
	ok, reason = Budget(0.0123, &b, false)
	require.False(t, ok)
	require.Contains(t, reason, "($0.0123) has reached this issue's budget ($0.01, budget_usd)")
	require.Contains(t, reason, "ai::retry_once")
	ok, _ = Budget(0.0123, &b, true)
	require.True(t, ok, "ai::retry_once allows one more run")
	ok, _ = Budget(100, nil, false)
	require.True(t, ok, "no budget")
}
