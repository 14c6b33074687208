package mailbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
)

// interruptDevelopment records n more development runs of the mailbox, each ended interrupted
// by recovery as after a stop of Alfred before its agent started.
func interruptDevelopment(t *testing.T, b *bundle, mbID int64, n int) {
	t.Helper()
	ctx := context.Background()
	for range n {
		r := &mailbox.Run{MailboxID: mbID, Phase: string(phase.Development)}
		require.NoError(t, b.store.StartRun(ctx, r))
		r.Status, r.Applied = mailbox.RunInterrupted, true
		r.Outcome = fmt.Sprintf("interrupted: its container alfred-x-%d was created but never started", r.ID)
		changed, err := b.store.FinishRecoveredRun(ctx, r)
		require.NoError(t, err)
		require.True(t, changed)
	}
}

// interruptedStreak is a mailbox in development whose last n development runs (n >= 2) were all
// interrupted by stops of Alfred: the crashed run, n-2 earlier ones, and the run the last stop
// cut, which the pass's own recovery finds interrupted.
func interruptedStreak(t *testing.T, n int) (*bundle, *mailbox.Machine) {
	t.Helper()
	b, m, rx, run := crashedInDevelopment(t)
	rx.recover = func(phase.Job, bool) *phase.Outcome {
		return &phase.Outcome{Interrupted: true, Recovered: true, InterruptReason: "its container x was created but never started"}
	}
	ctx := context.Background()
	require.NoError(t, b.store.FinishRun(ctx, &mailbox.Run{ID: run.ID, Status: mailbox.RunInterrupted,
		Outcome: "interrupted: its container alfred-x was removed while Alfred was not running"}))
	interruptDevelopment(t, b, run.MailboxID, n-2)
	r := &mailbox.Run{MailboxID: run.MailboxID, Phase: string(phase.Development)}
	require.NoError(t, b.store.StartRun(ctx, r)) // the run the last stop cut: recovered by the pass
	return b, m
}

// A development run interrupted by stops of Alfred is run again within its budget: with
// InterruptedRunBudget-1 runs in a row interrupted (the last one by the pass's own recovery),
// the phase runs once more.
func TestInterruptedRunsWithinBudgetRunAgain(t *testing.T) {
	t.Parallel()
	b, m := interruptedStreak(t, mailbox.InterruptedRunBudget-1)
	mb := b.advanceWith(m)
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Equal(t, 1, developmentJobs(b.exec), "run again within the budget")
}

// Beyond the budget the issue is blocked with the reason instead of running the phase again
// for ever; a writer's retry gives the phase a fresh budget and it runs (once).
func TestInterruptedRunsBeyondBudgetBlock(t *testing.T) {
	t.Parallel()
	// The crashed run plus Budget-1 earlier ones: a streak of Budget.
	b, m := interruptedStreak(t, mailbox.InterruptedRunBudget)

	mb := b.advanceWith(m)
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Zero(t, developmentJobs(b.exec), "the phase was not run a fourth time")
	require.Contains(t, b.lastComment(), fmt.Sprintf("the development run was interrupted %d times in a row", mailbox.InterruptedRunBudget))
	require.Contains(t, b.lastComment(), "created but never started")
	b.requireUniqueMarkers()

	// A pass again changes nothing: blocked, no run.
	mb = b.advanceWith(m)
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Zero(t, developmentJobs(b.exec))

	b.deliver(comment("alice", "retry"))
	mb = b.advanceWith(m)
	require.Equal(t, mailbox.StateInCI, mb.State, "a retry runs the phase again")
	require.Equal(t, 1, developmentJobs(b.exec))
	b.requireUniqueMarkers()
}
