package mailbox_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
)

// canceller is the store's RequestCancel, which the pages call (spec/operations.md, "Controls").
type canceller interface {
	RequestCancel(ctx context.Context, runID int64, by string) error
}

func TestOperatorCancelStopsTheRunAndTellsTheIssueOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.block = make(chan struct{})
	b.deliver(assign("alice"))
	done := make(chan *mailbox.Mailbox)
	go func() { done <- b.advance() }()
	signal(t, "the run started", func() bool { return b.runsStarted() == 1 })
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	running, err := b.store.RunningRuns(context.Background(), mb.ID)
	require.NoError(t, err)
	require.Len(t, running, 1)
	require.NoError(t, b.store.(canceller).RequestCancel(context.Background(), running[0].ID, "operator from 127.0.0.1"))

	select { // the running phase sees the request and stops the job
	case mb = <-done:
	case <-time.After(2 * time.Minute): // a bound for a stuck test, not a measure of speed
		t.Fatal("the run was not stopped")
	}
	require.Equal(t, mailbox.StateBlocked, mb.State)
	runs, err := b.store.Runs(context.Background(), mb.ID)
	require.NoError(t, err)
	require.Equal(t, mailbox.RunInterrupted, runs[0].Status)
	told := b.lastComment()
	require.Contains(t, told, "an operator cancelled the analysis.functional run (attempt 1) from Alfred's pages.")
	require.NotContains(t, told, "127.0.0.1", "the operator's address stays on the pages")

	before := len(b.comments())
	b.advance() // nothing more to do: no second comment, no new run
	require.Len(t, b.comments(), before)
	require.Equal(t, 1, b.runsStarted())
	b.requireUniqueMarkers()
}

func TestDrainFinishesTheRunAndStartsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w, release := b.heldWorkers(t, 1)

	first := b.assignNew(t, "A long run")
	signal(t, "the first run started", func() bool { return b.runsStarted() == 1 })
	w.Drain(true)
	require.True(t, w.Draining())
	second := b.assignNew(t, "Arrives while draining")
	release() // the run in progress finishes and its outcome is applied
	signal(t, "the first run's questions", func() bool { return strings.Contains(b.commentsOf(first), "Which separator?") })

	// Draining: no claim takes the second mailbox, whose event waits in the inbox.
	worked, err := w.OnceEvents(context.Background())
	require.NoError(t, err)
	require.False(t, worked, "no lease is taken while draining")
	worked, err = w.OnceRun(context.Background())
	require.NoError(t, err)
	require.False(t, worked)
	mb, err := b.store.Find(context.Background(), second)
	require.NoError(t, err)
	require.Nil(t, mb.LeaseOwner, "no worker holds it")
	pending, err := b.store.PendingEvents(context.Background(), mb.ID)
	require.NoError(t, err)
	require.Len(t, pending, 1, "the event is stored and waits")
	require.Empty(t, b.commentsOf(second))

	w.Drain(false)
	signal(t, "the second issue acknowledged", func() bool {
		return strings.Contains(b.commentsOf(second), "Thanks @alice, I am on it")
	})
}

// A run a restarted process reattached to, cancelled by an operator, blocks the issue as a
// live run's cancel does, and is not run again.
func TestOperatorCancelOfAReattachedRunBlocks(t *testing.T) {
	t.Parallel()
	b, m, rx, run := crashedInDevelopment(t)
	require.NoError(t, b.store.(canceller).RequestCancel(context.Background(), run.ID, "operator from 127.0.0.1"))
	rx.recover = func(job phase.Job, wait bool) *phase.Outcome {
		return &phase.Outcome{Interrupted: true, Recovered: true, InterruptReason: "stopped"}
	}
	mb := b.advanceWith(m)
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Contains(t, b.lastComment(), "an operator cancelled the development run (attempt 1) from Alfred's pages.")
	require.Zero(t, developmentJobs(b.exec), "not run again")
	require.Contains(t, b.exec.cleanups, mb.ID, "its containers and worktree cleaned up")
	b.requireUniqueMarkers()
}

// A drain holds the next run of a pass already going: the pass that ran the functional
// analysis (no questions) does not go on to start the technical one; the mailbox waits, due, and
// the run starts once the drain stops.
func TestDrainHoldsTheNextRunOfAPassInProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := *b.exec.results["analysis.functional"]
	r.Questions = nil
	b.exec.results["analysis.functional"] = &r
	w, release := b.heldWorkers(t, 1)

	ref := b.assignNew(t, "A long run")
	signal(t, "the first run started", func() bool { return b.runsStarted() == 1 })
	w.Drain(true)
	release()
	signal(t, "the functional analysis applied and the pass ended", func() bool {
		mb, err := b.store.Find(context.Background(), ref)
		return err == nil && mb.State == mailbox.StateTechnicalAnalysis && mb.LeaseOwner == nil
	})
	require.Equal(t, 1, b.runsStarted(), "no run started after the drain")

	w.Drain(false)
	signal(t, "the technical analysis once the drain stops", func() bool { return b.runsStarted() == 2 })
}

// An operator cancels a run whose process died (the row still says running: its page still
// offers Cancel); the start-up recovery (which says nothing on the forge) finds its container
// gone, and the next pass blocks the issue as a live run's cancel does: not run again.
func TestOperatorCancelOfADeadRunBlocks(t *testing.T) {
	t.Parallel()
	b, m, rx, run := crashedInDevelopment(t)
	require.NoError(t, b.store.(canceller).RequestCancel(context.Background(), run.ID, "operator from 127.0.0.1"))
	rx.recover = func(job phase.Job, wait bool) *phase.Outcome {
		return &phase.Outcome{Interrupted: true, Recovered: true, InterruptReason: "its container was removed"}
	}
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "restarted", LeaseTTL: time.Minute}, b.store, m, b.log)
	require.NoError(t, w.Recover(context.Background())) // at start-up
	mb := b.advanceWith(m)
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Zero(t, developmentJobs(b.exec), "not run again")
	require.Contains(t, b.lastComment(), "an operator cancelled the development run (attempt 1)")
}

// A drain holds new runs only: a pass in progress that collects the outcome of a run it
// reattached to (the container ended while it waited) still applies it, as a drain promises.
func TestDrainStillAppliesTheOutcomeOfAReattachedRun(t *testing.T) {
	t.Parallel()
	b, m, rx, _ := crashedInDevelopment(t)
	sha := fmt.Sprintf("%040d", 7)
	rx.recover = func(job phase.Job, wait bool) *phase.Outcome {
		b.fake.SetBranch(repo, job.Branch, sha)
		return &phase.Outcome{Recovered: true, Container: "c", Output: "out", HeadSHA: sha,
			Result: &phase.Result{Summary: "Added the CSV export.", CommitMessage: "Add CSV export"}}
	}
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	drained := mailbox.WithRunGate(context.Background(), func() bool { return false })
	require.NoError(t, m.Advance(drained, mb))
	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateInCI, mb.State, "the collected outcome opened the merge request")
	require.Zero(t, developmentJobs(b.exec), "and no run started")
}

// errOnCancel is the runner when a cancel lands during the commit or push after the container
// ended: git fails with the cancelled context, and Execute returns an error.
type errOnCancel struct{ *scriptedJobs }

func (e errOnCancel) Execute(ctx context.Context, job phase.Job) (*phase.Outcome, error) {
	out, err := e.scriptedJobs.Execute(ctx, job)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("push agent/1: %w", ctx.Err())
	}
	return out, err
}

// An operator's cancel that lands while the runner commits or pushes (the step fails, not the
// container) blocks the issue as any cancel does, instead of failing the pass and running the
// phase again.
func TestOperatorCancelDuringThePushBlocks(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	m := mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute}, b.store, b.bots, errOnCancel{b.exec}, b.clock.Now, b.log)
	b.exec.mu.Lock()
	b.exec.block = make(chan struct{})
	b.exec.mu.Unlock()
	b.deliver(assign("alice"))
	done := make(chan error, 1)
	go func() {
		mb, err := b.store.Find(context.Background(), b.ref)
		if err != nil {
			done <- err
			return
		}
		done <- m.Advance(context.Background(), mb)
	}()
	signal(t, "the run started", func() bool { return b.runsStarted() == 1 })
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	running, err := b.store.RunningRuns(context.Background(), mb.ID)
	require.NoError(t, err)
	require.Len(t, running, 1)
	require.NoError(t, b.store.(canceller).RequestCancel(context.Background(), running[0].ID, "operator from 127.0.0.1"))
	require.NoError(t, <-done)
	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateBlocked, mb.State, "the operator's cancel blocks the issue")
	require.Contains(t, b.lastComment(), "an operator cancelled the analysis.functional run (attempt 1)")
	require.Equal(t, 1, b.runsStarted(), "not run again")
	runs, err := b.store.Runs(context.Background(), mb.ID)
	require.NoError(t, err)
	require.Equal(t, "interrupted", runs[len(runs)-1].Outcome,
		"recorded as a cancel of a running container is: not an interruption by Alfred stopping, which a budget counts")
}

// slowControls is a store's Installation whose InstallationControls returns what it read only
// when released: the read of a SyncInstallation that began before an operator's drain.
type slowControls struct {
	mailbox.Installation
	read, release chan struct{}
}

func (s slowControls) InstallationControls(ctx context.Context) (mailbox.InstallationState, error) {
	st, err := s.Installation.InstallationControls(ctx)
	s.read <- struct{}{}
	<-s.release
	return st, err
}

// The drain form on a replica writes the row, then drains its workers at once; a read of the
// controls that began before the row was written returns after it, and must not undo the
// drain (the replica would claim again until its next read).
func TestAReadBeforeTheDrainDoesNotUndoIt(t *testing.T) {
	t.Parallel()
	b := setupPG(t)
	inst, ok := b.store.(mailbox.Installation)
	require.True(t, ok)
	w := mailbox.NewWorkers(mailbox.WorkerConfig{Owner: "w"}, b.store, b.machine, b.log)
	slow := slowControls{Installation: inst, read: make(chan struct{}), release: make(chan struct{})}
	synced := make(chan error, 1)
	go func() { synced <- w.SyncInstallation(context.Background(), slow) }()
	<-slow.read // it read no drain
	require.NoError(t, inst.SetControl(context.Background(), mailbox.ControlDrain, true, "operator"))
	w.Drain(true)
	close(slow.release)
	require.NoError(t, <-synced)
	require.True(t, w.Draining(), "the earlier read does not undo the drain")
	require.NoError(t, w.SyncInstallation(context.Background(), inst))
	require.True(t, w.Draining(), "and the next read follows the row")
}
