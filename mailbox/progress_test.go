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

// TestElapsed: the headline's elapsed time at the edges users see — 0 s, multiples of ten
// (which once lost their last digit and unit), the minute and the hour.
func TestElapsed(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{time.Second, "1s"},
		{9 * time.Second, "9s"},
		{10 * time.Second, "10s"},
		{20 * time.Second, "20s"},
		{30*time.Second + 400*time.Millisecond, "30s"},
		{59 * time.Second, "59s"},
		{59*time.Second + 600*time.Millisecond, "1m"},
		{60 * time.Second, "1m"},
		{61 * time.Second, "1m"},
		{100 * time.Second, "2m"},
		{10 * time.Minute, "10m"},
		{20*time.Minute + 10*time.Second, "20m"},
		{59*time.Minute + 40*time.Second, "1h"},
		{time.Hour, "1h"},
		{time.Hour + 10*time.Second, "1h"},
		{time.Hour + 10*time.Minute, "1h10m"},
		{10 * time.Hour, "10h"},
		{25 * time.Hour, "25h"},
		{25*time.Hour + 5*time.Minute, "25h5m"},
	} {
		require.Equal(t, tc.want, elapsed(t0.Add(tc.d), t0), "%v", tc.d)
	}
	require.Equal(t, "0s", elapsed(t0, time.Time{}), "no start")
	require.Equal(t, "0s", elapsed(t0, t0.Add(time.Second)), "a start after now (clock skew)")
}

// TestRenderProgressTensOfSeconds: the headline of a run 10 s in, queued work 20 s in, and a
// mailbox whose first run started 0 s ago, as the issue shows them.
func TestRenderProgressTensOfSeconds(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	running := RenderProgress(Progress{Phase: "analysis", Running: true, Since: t0, Started: t0, Now: t0.Add(10 * time.Second)})
	queued := RenderProgress(Progress{Phase: "development", Since: t0.Add(40 * time.Second), Started: t0, Now: t0.Add(time.Minute),
		Runs: []ProgressRun{{Phase: "analysis", Duration: 40 * time.Second, TokensIn: 10, TokensOut: 5, CostUSD: 0.01, Rated: true}}})
	started := RenderProgress(Progress{Phase: "analysis", Running: true, Since: t0, Started: t0, Now: t0})
	golden(t, "progress_tens_of_seconds.md", running+"\n---\n\n"+queued+"\n---\n\n"+started)
	require.Contains(t, running, "**Running:** analysis for 10s · 10s since the first run")
	require.Contains(t, queued, "**Queued:** development, waiting 20s · 1m since the first run")
	require.Contains(t, started, "**Running:** analysis for 0s · 0s since the first run")
}

func TestBudget(t *testing.T) {
	t.Parallel()
	b := 0.01
	ok, reason := Budget(0, 0, &b, false)
	require.True(t, ok)
	require.Empty(t, reason)
	ok, reason = Budget(0.0123, 0, &b, false)
	require.False(t, ok)
	require.Contains(t, reason, "($0.0123) has reached this issue's budget ($0.01, budget_usd)")
	require.Contains(t, reason, "ai::retry_once")
	require.NotContains(t, reason, "unrated")
	ok, _ = Budget(0.0123, 0, &b, true)
	require.True(t, ok, "ai::retry_once allows one more run")
	ok, _ = Budget(100, 0, nil, false)
	require.True(t, ok, "no budget")

	// Unrated runs are said, never silently counted as 0.
	ok, reason = Budget(0.0123, 2, &b, false)
	require.False(t, ok)
	require.Contains(t, reason, "the cost so far ($0.0123 + 2 unrated runs) has reached this issue's budget ($0.01, budget_usd)")
	require.Contains(t, reason, "Unrated runs are not in the sum")
	zero := 0.0
	ok, reason = Budget(0, 1, &zero, false)
	require.False(t, ok)
	require.Contains(t, reason, "the cost so far (1 unrated run) has reached")
	require.NotContains(t, reason, "$0.0000")
}

// TestRenderProgressUnrated: with unrated runs the budget line and the totals say how many,
// and a sum of unrated runs only is never $0.0000.
func TestRenderProgressUnrated(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	budget := 1.0
	all := RenderProgress(Progress{Now: t0, BudgetUSD: &budget, Runs: []ProgressRun{
		{Phase: "analysis", Duration: 20 * time.Second}, {Phase: "development", Duration: time.Minute}}})
	require.Contains(t, all, "| **Total** | 2 | 1m20s | 0 | 0 | unrated |")
	require.Contains(t, all, "Budget: $1.00, spent 2 unrated runs (an unrated run's cost is unknown and not counted).")
	require.NotContains(t, all, "$0.0000")
	some := RenderProgress(Progress{Now: t0, BudgetUSD: &budget, Runs: []ProgressRun{
		{Phase: "analysis", Duration: 20 * time.Second, CostUSD: 0.42, Rated: true}, {Phase: "development", Duration: time.Minute}}})
	require.Contains(t, some, "| **Total** | 2 | 1m20s | 0 | 0 | $0.4200 + 1 unrated run |")
	require.Contains(t, some, "Budget: $1.00, spent $0.4200 + 1 unrated run (an unrated run's cost is unknown and not counted).")
}

// While auto-merge waits, the status comment's headline says for what.
func TestRenderProgressAutoMergeWaits(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	got := RenderProgress(Progress{Now: t0, AutoMergeWaits: "an approval of 2222222 by a member with write access (0 of 1)"})
	require.Contains(t, got, "**Auto-merge waits** for an approval of 2222222 by a member with write access (0 of 1).")
}
