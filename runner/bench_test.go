package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
)

const benchScript = `
answer:
  summary: Immediate.
  answer: "42"
`

// BenchmarkRunOverhead measures what the Executor and Docker add around an agent: input and
// output dirs, create/start of a hardened container, wait, logs, result, destroy. The script
// agent answers immediately, so agent time is a few milliseconds of process start; ms/run is
// the per-phase overhead.
func BenchmarkRunOverhead(b *testing.B) {
	ctx := context.Background()
	d := setupDocker(b, ctx, benchScript)
	ex := d.executor(b, time.Minute)
	wt := worktree(b)
	b.ResetTimer()
	start := time.Now()
	n := 0
	for b.Loop() {
		out, err := ex.Run(ctx, runner.RunRequest{MailboxID: 98, RunID: runSeq.Add(1), Attempt: 1,
			Input: phase.Input{Phase: phase.Answer}, Worktree: wt})
		require.NoError(b, err)
		require.Equal(b, runner.StatusSucceeded, out.Status, "%v", out.Err)
		n++
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(n), "ms/run")
}
