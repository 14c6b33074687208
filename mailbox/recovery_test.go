package mailbox_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/pgtest"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

func TestStoreExecutorLifecycle(t *testing.T) {
	t.Parallel()
	db, _ := pgtest.New(t)
	s := mailbox.NewStore(db)
	ctx := context.Background()
	_, err := s.Deliver(ctx, event(1, "d1", "h1"))
	require.NoError(t, err)
	mb, err := s.Find(ctx, forge.IssueRef{Forge: "gl", Repo: "acme/shop", Number: 1})
	require.NoError(t, err)
	run := &mailbox.Run{MailboxID: mb.ID, Phase: "development"}
	require.NoError(t, s.StartRun(ctx, run))

	rec := &runner.ContainerRecord{RunID: run.ID, MailboxID: mb.ID, ContainerName: "alfred-mbx1-r1-development-a1",
		Adapter: "script", WorkspacePath: "/data/worktrees/x", Branch: "agent/issue-1"}
	require.NoError(t, s.InsertExecutor(ctx, rec))
	require.NotZero(t, rec.ID)
	require.Equal(t, runner.ContainerStarting, rec.Status)
	require.Equal(t, "docker", rec.Runtime)
	dup := *rec
	require.ErrorIs(t, s.InsertExecutor(ctx, &dup), runner.ErrNameConflict, "one row per container name")

	require.NoError(t, s.ExecutorReady(ctx, rec.ID, "abc123"))
	require.NoError(t, s.ExecutorSeen(ctx, rec.ID))
	live, err := s.LiveExecutors(ctx)
	require.NoError(t, err)
	require.Len(t, live, 1)
	require.Equal(t, runner.ContainerReady, live[0].Status)
	require.Equal(t, "abc123", live[0].ContainerID)
	require.Equal(t, "script", live[0].Adapter)
	ids, err := s.UnfinishedMailboxes(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{mb.ID}, ids)
	withLive, err := s.LiveExecutorMailboxes(ctx)
	require.NoError(t, err)
	require.True(t, withLive[mb.ID])

	require.Error(t, s.EndExecutor(ctx, rec.ID, runner.ContainerReady, ""), "ready is not a final status")
	require.NoError(t, s.EndExecutor(ctx, rec.ID, runner.ContainerStopped, "succeeded, exit 0"))
	live, err = s.LiveExecutors(ctx)
	require.NoError(t, err)
	require.Empty(t, live)
	all, err := s.RunExecutors(ctx, run.ID)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, runner.ContainerStopped, all[0].Status)
	require.Equal(t, "succeeded, exit 0", all[0].ErrorMessage)

	// A run finished by recovery is unapplied until the machine acts on it.
	running, err := s.RunningRuns(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, running, 1)
	r := running[0]
	r.Status, r.Outcome, r.Result, r.HeadSHA, r.Applied = mailbox.RunSucceeded, "ok", `{"summary":"x"}`, "abc", false
	changed, err := s.FinishRecoveredRun(ctx, &r)
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = s.FinishRecoveredRun(ctx, &r)
	require.NoError(t, err)
	require.False(t, changed, "only a running run is finished")
	un, err := s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.NotNil(t, un)
	require.Equal(t, "abc", un.HeadSHA)
	require.NoError(t, s.MarkApplied(ctx, nil, un.ID))
	un, err = s.UnappliedRun(ctx, mb.ID, "development", "")
	require.NoError(t, err)
	require.Nil(t, un)
}

// recoveringExecutor is the scripted executor plus a scripted Recover (runner.Service's
// recovery, without Docker).
type recoveringExecutor struct {
	*scriptedExecutor
	mu      sync.Mutex
	recover func(job phase.Job, wait bool) *phase.Outcome
	asked   []bool // the wait argument of every Recover call
}

func (e *recoveringExecutor) Recover(_ context.Context, job phase.Job, wait bool) (*phase.Outcome, error) {
	e.mu.Lock()
	e.asked = append(e.asked, wait)
	e.mu.Unlock()
	return e.recover(job, wait), nil
}

// crashedInDevelopment brings a mailbox to the point a process was killed at: state
// in_development, a development run row still running. It returns the bundle, a machine on a
// recovering executor, and the run.
func crashedInDevelopment(t *testing.T) (*bundle, *mailbox.Machine, *recoveringExecutor, mailbox.Run) {
	t.Helper()
	b := setup(t, "type::task")
	b.exec.results["analysis.functional"] = &phase.Result{Summary: "ok", Understanding: "clear"}
	b.deliver(assign("alice"))
	mb := b.step()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	ctx := context.Background()
	mb.State = mailbox.StateInDevelopment
	mb.Branch = mailbox.BranchName("agent/", mb.Number, mb.Title)
	require.NoError(t, b.store.Save(ctx, nil, mb))
	run := &mailbox.Run{MailboxID: mb.ID, Phase: string(phase.Development)}
	require.NoError(t, b.store.StartRun(ctx, run))

	rx := &recoveringExecutor{scriptedExecutor: b.exec}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m := mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute}, b.store,
		map[string]mailbox.Bot{"gl": {Forge: b.fake, Login: forgetest.BotLogin}}, rx, b.clock.Now, log)
	return b, m, rx, *run
}

func (b *bundle) stepWith(m *mailbox.Machine) *mailbox.Mailbox {
	b.t.Helper()
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(b.t, err)
	require.NoError(b.t, m.Step(context.Background(), mb))
	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(b.t, err)
	return mb
}

func developmentJobs(e *scriptedExecutor) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, j := range e.jobs {
		if j.Input.Phase == phase.Development {
			n++
		}
	}
	return n
}

// A run whose container finished while Alfred was down is collected by recovery (start-up,
// without waiting) and applied by the next Step instead of being run again.
func TestRecoveredRunIsAppliedNotRerun(t *testing.T) {
	t.Parallel()
	b, m, rx, run := crashedInDevelopment(t)
	sha := fmt.Sprintf("%040d", 7)
	rx.recover = func(job phase.Job, wait bool) *phase.Outcome {
		require.Equal(t, run.ID, job.RunID)
		require.Equal(t, phase.Development, job.Input.Phase)
		require.True(t, job.Push)
		b.fake.SetBranch(repo, job.Branch, sha)
		return &phase.Outcome{Recovered: true, Container: "c", Output: "out", HeadSHA: sha,
			Result: &phase.Result{Summary: "Added the CSV export.", CommitMessage: "Add CSV export"}}
	}
	ctx := context.Background()
	mb, err := b.store.Find(ctx, b.ref)
	require.NoError(t, err)
	running, err := m.RecoverRuns(ctx, mb)
	require.NoError(t, err)
	require.False(t, running)
	runs, err := b.store.Runs(ctx, mb.ID)
	require.NoError(t, err)
	last := runs[len(runs)-1]
	require.Equal(t, mailbox.RunSucceeded, last.Status)
	require.False(t, last.Applied, "recorded, not yet acted on")
	require.Equal(t, sha, last.HeadSHA)

	mb = b.stepWith(m)
	require.Equal(t, mailbox.StateInCI, mb.State, "the recovered result opened the merge request")
	require.NotZero(t, mb.MRNumber)
	require.Equal(t, sha, mb.HeadSHA)
	require.Zero(t, developmentJobs(b.exec), "the development run was not run again")
	runs, err = b.store.Runs(ctx, mb.ID)
	require.NoError(t, err)
	var dev []mailbox.Run
	for _, r := range runs {
		if r.Phase == "development" {
			dev = append(dev, r)
		}
	}
	require.Len(t, dev, 1)
	require.Equal(t, mailbox.RunSucceeded, dev[0].Status)
	require.True(t, dev[0].Applied)
	require.Equal(t, []bool{false}, rx.asked, "start-up recovery does not wait; the step had nothing left")
	b.requireUniqueMarkers()
}

// A container that vanished while Alfred was down: the run is interrupted with the reason and
// the session hook, the mailbox's leftovers are cleaned and the phase runs again.
func TestVanishedContainerInterruptsAndReruns(t *testing.T) {
	t.Parallel()
	b, m, rx, run := crashedInDevelopment(t)
	rx.recover = func(job phase.Job, wait bool) *phase.Outcome {
		return &phase.Outcome{Interrupted: true, Recovered: true, InterruptReason: "its container x was removed while Alfred was not running",
			NotResumableReason: "the script adapter cannot resume sessions"}
	}
	mb := b.stepWith(m)
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Equal(t, []bool{true}, rx.asked, "a Step reattaches (waits)")
	require.Equal(t, 1, developmentJobs(b.exec), "run again")
	require.Contains(t, b.exec.cleanups, mb.ID)
	require.Empty(t, b.exec.removedSessions, "a reclaimed lease keeps the agent session")
	runs, err := b.store.Runs(context.Background(), mb.ID)
	require.NoError(t, err)
	var dev []mailbox.Run
	for _, r := range runs {
		if r.Phase == "development" {
			dev = append(dev, r)
		}
	}
	require.Len(t, dev, 2)
	require.Equal(t, run.ID, dev[0].ID)
	require.Equal(t, mailbox.RunInterrupted, dev[0].Status)
	require.Contains(t, dev[0].Outcome, "was removed while Alfred was not running")
	require.False(t, dev[0].Resumable)
	require.Equal(t, "the script adapter cannot resume sessions", dev[0].NotResumableReason)
	require.Equal(t, mailbox.RunSucceeded, dev[1].Status)
	require.Equal(t, 2, dev[1].Attempt)
}

// A container still running at start-up is left to the first Step, which reattaches (waits)
// and applies the collected failure as a failed run: the mailbox blocks.
func TestStillRunningIsLeftToTheStepThenCollected(t *testing.T) {
	t.Parallel()
	b, m, rx, _ := crashedInDevelopment(t)
	rx.recover = func(job phase.Job, wait bool) *phase.Outcome {
		if !wait {
			return nil // still running
		}
		return &phase.Outcome{Recovered: true, ExitCode: 3, Failure: "the agent exited with code 3"}
	}
	ctx := context.Background()
	mb, err := b.store.Find(ctx, b.ref)
	require.NoError(t, err)
	running, err := m.RecoverRuns(ctx, mb)
	require.NoError(t, err)
	require.True(t, running)
	left, err := b.store.RunningRuns(ctx, mb.ID)
	require.NoError(t, err)
	require.Len(t, left, 1, "nothing changed while the container runs")

	mb = b.stepWith(m)
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Contains(t, b.lastComment(), "the agent exited with code 3")
	require.Zero(t, developmentJobs(b.exec))
	require.Equal(t, []bool{false, true}, rx.asked)
}
