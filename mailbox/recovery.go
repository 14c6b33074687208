package mailbox

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// RunRecoverer is implemented by JobRunners that can find a run again after the process running
// it stopped (runner.Service). Without it the machine interrupts every unfinished run and runs
// the phase again.
type RunRecoverer interface {
	// Recover finishes the run of job whose worker stopped: an Interrupted outcome (with a
	// reason and the session hook) when nothing can be collected, the collected outcome
	// (Recovered set) when its container exited or, with wait, once it exits; (nil, nil) when
	// the container still runs and wait is false. See runner.Service.Recover.
	Recover(ctx context.Context, job phase.Job, wait bool) (*phase.Outcome, error)
}

// RecoverRuns is the start-up half of recovery for a mailbox the caller leased: every run
// still in status running is looked up without waiting (runner.Service.Recover with wait
// false) — a vanished container or a run with no live container record is marked interrupted with the
// reason, an exited container's outcome is collected and recorded as a finished, unapplied run
// that the next pass applies. It reports whether a container still runs; the next pass
// reattaches to it.
func (m *Machine) RecoverRuns(ctx context.Context, mb *Mailbox) (running bool, err error) {
	return m.recoverRuns(ctx, nil, mb, false)
}

// recoverRuns accounts for the mailbox's runs still in status running, whose worker stopped.
// With wait (a pass, Machine.Advance: the caller holds the lease and a worker slot), a container that still
// runs is reattached and waited for, and an event that cancels the work stops it, as for a
// run. For an interrupted run the mailbox's containers and worktrees are cleaned up, and the
// state's phase runs again.
func (m *Machine) recoverRuns(ctx context.Context, bot *Bot, mb *Mailbox, wait bool) (running bool, err error) {
	rec, ok := m.jobs.(RunRecoverer)
	if !ok {
		interrupted, err := m.store.InterruptRuns(ctx, mb.ID)
		if err != nil || len(interrupted) == 0 {
			return false, err
		}
		m.log.Warn("runs interrupted by a stopped worker; cleaning up and running again", "mailbox_id", mb.ID, "runs", len(interrupted))
		if err := m.jobs.Cleanup(ctx, mb.ID); err != nil {
			return false, fmt.Errorf("clean up interrupted runs: %w", err)
		}
		return false, nil
	}
	runs, err := m.store.RunningRuns(ctx, mb.ID)
	if err != nil || len(runs) == 0 {
		return false, err
	}
	cleanup := false
	var cancelled *Run // the last run an operator cancelled
	var cancelledBy string
	for _, r := range runs {
		job := m.jobFor(mb, r, phase.Input{}, forge.Repository{Path: mb.Repo})
		runCtx, stop := context.WithCancel(ctx)
		if wait && bot != nil {
			go m.watchCancel(runCtx, stop, *bot, mb, r.ID)
		}
		out, err := rec.Recover(runCtx, job, wait)
		stop()
		if err != nil {
			return false, fmt.Errorf("recover run %d: %w", r.ID, err)
		}
		if out == nil {
			running = true
			m.log.Info("run still running after a restart; the next pass reattaches to it", "mailbox_id", mb.ID, "run_id", r.ID)
			continue
		}
		recoveredRow(&r, out)
		// An operator's cancel of a run whose process stopped (its page still offered Cancel)
		// holds whatever recovery finds: the run is not run again, and an outcome collected
		// meanwhile is not acted on.
		by, err := m.store.CancelRequested(ctx, r.ID)
		if err != nil {
			return false, err
		}
		if by != "" {
			r.Applied = true
			c := r
			cancelled, cancelledBy = &c, by
		}
		if _, err := m.store.FinishRecoveredRun(context.WithoutCancel(ctx), &r); err != nil {
			return false, err
		}
		m.log.Warn("run recovered after a restart", "mailbox_id", mb.ID, "run_id", r.ID, "phase", r.Phase,
			"status", r.Status, "outcome", r.Outcome, "resumable", r.Resumable, "not_resumable_reason", r.NotResumableReason)
		cleanup = cleanup || out.Interrupted
	}
	if cleanup && !running {
		if err := m.jobs.Cleanup(ctx, mb.ID); err != nil {
			return false, fmt.Errorf("clean up interrupted runs: %w", err)
		}
	}
	if cancelled != nil && !running && def(mb.State).Phase != "" {
		if bot == nil {
			// The start-up recovery says nothing on the forge: the mailbox's next pass blocks it.
			mb.Data.CancelledAttempt = cancelled.Attempt
			return false, nil
		}
		return false, m.blockCancelled(ctx, *bot, mb, cancelled.ID, cancelled.Attempt, cancelledBy)
	}
	return running, nil
}

// blockCancelled blocks the mailbox whose run (attempt) an operator (by, "" when not known any
// more) cancelled: said in the issue once, not run again; a writer's retry runs it again.
func (m *Machine) blockCancelled(ctx context.Context, bot Bot, mb *Mailbox, runID int64, attempt int, by string) error {
	m.log.Info("run cancelled by an operator", "mailbox_id", mb.ID, "run_id", runID, "by", by)
	mb.Data.CancelledAttempt = 0
	return m.block(ctx, bot, mb, onRunFailed, mb.State,
		fmt.Sprintf("an operator cancelled the %s run (attempt %d) from Alfred's pages.", def(mb.State).runKey(), attempt))
}

// recoveredRow fills the run row from a recovered outcome. A collected outcome (succeeded or
// failed) is left unapplied for the machine; an interrupted one has nothing to apply.
func recoveredRow(r *Run, out *phase.Outcome) {
	r.Container = cmp.Or(out.Container, r.Container)
	r.Output, r.HeadSHA = out.Output, out.HeadSHA
	switch {
	case out.Interrupted:
		r.Status, r.Applied = RunInterrupted, true
		r.Outcome = "interrupted: " + cmp.Or(out.InterruptReason, "the worker running it stopped")
		r.Resumable, r.NotResumableReason = out.Resumable, out.NotResumableReason
		return
	case out.Failure != "":
		r.Status, r.Outcome = RunFailed, out.Failure
	default:
		r.Status, r.Outcome = RunSucceeded, "ok (collected after a restart)"
		if out.Result != nil {
			b, _ := json.Marshal(out.Result)
			r.Result = string(b)
		}
	}
	code := out.ExitCode
	r.ExitCode, r.Applied = &code, false
}

// applyRecovered acts on the latest run of the state's phase when recovery finished it and the
// machine has not acted on it yet, instead of starting a new run: a failure blocks as a failed
// run does, a success is applied as runPhase applies one. It reports whether there was such a
// run. The run is marked applied in the transaction that saves the mailbox.
func (m *Machine) applyRecovered(ctx context.Context, bot Bot, mb *Mailbox, state State, in phase.Input, repo *forge.Repository) (bool, error) {
	prev, err := m.store.UnappliedRun(ctx, mb.ID, string(in.Phase), string(in.Step))
	if err != nil || prev == nil {
		return false, err
	}
	m.log.Info("applying a stored run outcome", "mailbox_id", mb.ID, "run_id", prev.ID,
		"phase", in.Phase, "status", prev.Status)
	out := &phase.Outcome{Container: prev.Container, Output: prev.Output, HeadSHA: prev.HeadSHA}
	if prev.ExitCode != nil {
		out.ExitCode = *prev.ExitCode
	}
	if prev.Result != "" {
		out.Result = &phase.Result{}
		if err := json.Unmarshal([]byte(prev.Result), out.Result); err != nil {
			return true, fmt.Errorf("decode the result of recovered run %d: %w", prev.ID, err)
		}
	}
	switch {
	case prev.Status == RunSucceeded && out.Result != nil:
		mb.Data.Failures = 0
		err = m.applyResult(ctx, bot, mb, state, out, repo, prev.Attempt, prev.ID)
	case prev.Status == RunFailed && state == StateSelfReview:
		// A self-review that fails never blocks the issue: run again, then go on without it.
		err = m.selfReviewFailed(ctx, bot, mb, fmt.Sprintf("the %s run (attempt %d) failed: %s", def(state).runKey(), prev.Attempt, prev.Outcome))
	case prev.Status == RunFailed:
		mb.Data.Failures++
		err = m.block(ctx, bot, mb, onRunFailed, state, fmt.Sprintf("the %s run (attempt %d) failed: %s", def(state).runKey(), prev.Attempt, prev.Outcome))
	}
	if err != nil {
		return true, err
	}
	return true, m.store.SaveApplied(ctx, mb, prev.ID)
}

// Recover is the start-up recovery, run before the workers start: for every mailbox with a
// live container record or a run still running, it claims the mailbox's lease (one held by a live
// lease is left to the pass of whoever gets it next, which recovers the same way), calls
// Machine.RecoverRuns, makes the mailbox due at once so it continues by its normal rules, and
// releases the lease. A container that still runs is left to the first pass, which reattaches
// to it. Failures are logged per mailbox and the first is returned.
func (w *Workers) Recover(ctx context.Context) error {
	ids, err := w.store.UnfinishedMailboxes(ctx)
	if err != nil {
		return err
	}
	var first error
	for _, id := range ids {
		if err := w.recoverOne(ctx, id); err != nil {
			w.log.Error("start-up recovery failed; the mailbox's next pass tries again", "mailbox_id", id, "err", err)
			first = cmp.Or(first, err)
		}
	}
	return first
}

func (w *Workers) recoverOne(ctx context.Context, id int64) error {
	owner := w.claimOwner()
	mb, err := w.store.Claim(ctx, id, owner, w.cfg.LeaseTTL)
	if err != nil {
		return err
	}
	if mb == nil {
		w.log.Info("mailbox held by a live lease at start-up; its next pass recovers its runs", "mailbox_id", id)
		return nil
	}
	holdCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(w.cfg.LeaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-holdCtx.Done():
				return
			case <-t.C:
				_ = w.store.Extend(holdCtx, id, owner, w.cfg.LeaseTTL)
			}
		}
	}()
	_, rerr := w.machine.RecoverRuns(holdCtx, mb)
	cancel()
	relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer relCancel()
	if rerr == nil && !mb.State.Closed() && mb.State != StateIdle {
		now := w.machine.now()
		mb.WakeAt = &now // due at once: the mailbox continues by its normal rules
		rerr = w.store.Save(relCtx, mb)
	}
	if err := w.store.Release(relCtx, id, owner, 0); err != nil {
		return cmp.Or(rerr, err)
	}
	return rerr
}
