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

	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// recoveringJobs is the scripted job runner plus a scripted Recover (runner.Service's
// recovery, without Docker).
type recoveringJobs struct {
	*scriptedJobs
	mu      sync.Mutex
	recover func(job phase.Job, wait bool) *phase.Outcome
	asked   []bool // the wait argument of every Recover call
}

func (e *recoveringJobs) Recover(_ context.Context, job phase.Job, wait bool) (*phase.Outcome, error) {
	e.mu.Lock()
	e.asked = append(e.asked, wait)
	e.mu.Unlock()
	return e.recover(job, wait), nil
}

// crashedInDevelopment brings a mailbox to the point a process was killed at: state
// in_development, a development run row still running. It returns the bundle, a machine on a
// recovering job runner, and the run.
func crashedInDevelopment(t *testing.T) (*bundle, *mailbox.Machine, *recoveringJobs, mailbox.Run) {
	t.Helper()
	b := setup(t, "type::task")
	b.exec.results["analysis.functional"] = &phase.Result{Summary: "ok", Understanding: "clear"}
	b.deliver(assign("alice"))
	mb := b.advance()
	require.Equal(t, mailbox.StateWaitingValidation, mb.State)
	ctx := context.Background()
	mb.State = mailbox.StateInDevelopment
	mb.Branch = mailbox.BranchName("agent/", mb.Number, mb.Title)
	require.NoError(t, b.store.Save(ctx, mb))
	run := &mailbox.Run{MailboxID: mb.ID, Phase: string(phase.Development)}
	require.NoError(t, b.store.StartRun(ctx, run))

	rx := &recoveringJobs{scriptedJobs: b.exec}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m := mailbox.NewMachine(mailbox.Config{CIWait: 10 * time.Minute, CIPoll: time.Minute}, b.store,
		map[string]mailbox.Bot{"gl": {Forge: b.fake, Login: forgetest.BotLogin}}, rx, b.clock.Now, log)
	return b, m, rx, *run
}

func (b *bundle) advanceWith(m *mailbox.Machine) *mailbox.Mailbox {
	b.t.Helper()
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(b.t, err)
	require.NoError(b.t, m.Advance(context.Background(), mb))
	mb, err = b.store.Find(context.Background(), b.ref)
	require.NoError(b.t, err)
	return mb
}

func developmentJobs(e *scriptedJobs) int {
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
// without waiting) and applied by the next pass instead of being run again.
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

	mb = b.advanceWith(m)
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
	require.Equal(t, []bool{false}, rx.asked, "start-up recovery does not wait; the pass had nothing left")
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
	mb := b.advanceWith(m)
	require.Equal(t, mailbox.StateInCI, mb.State)
	require.Equal(t, []bool{true}, rx.asked, "a pass reattaches (waits)")
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

// A container still running at start-up is left to the first pass, which reattaches (waits)
// and applies the collected failure as a failed run: the mailbox blocks.
func TestStillRunningIsLeftToThePassThenCollected(t *testing.T) {
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

	mb = b.advanceWith(m)
	require.Equal(t, mailbox.StateBlocked, mb.State)
	require.Contains(t, b.lastComment(), "the agent exited with code 3")
	require.Zero(t, developmentJobs(b.exec))
	require.Equal(t, []bool{false, true}, rx.asked)
}

// A renamed issue: the job of a live run and the job recovery rebuilds for the same run after
// a crash name the same branch, session and commit message.
func TestRecoveredJobMatchesTheLiveJobOfARenamedIssue(t *testing.T) {
	t.Parallel()
	b := setup(t, "type::task")
	b.exec.results["analysis.functional"] = &phase.Result{Summary: "ok", Understanding: "clear"}
	b.deliver(assign("alice"))
	require.Equal(t, mailbox.StateWaitingValidation, b.advance().State)
	b.deliver(forge.Event{Type: forge.EventIssueEdited, Sender: forge.User{Login: "alice"}, Title: "Export every report as XLSX"})
	b.advance()

	b.exec.block = make(chan struct{})
	b.deliver(forge.Event{Type: forge.EventLabels, Sender: forge.User{Login: "alice"}, LabelsKnown: true,
		Labels: append(b.fake.IssueLabels(b.ref), "ai::validate_plan")})
	done := make(chan *mailbox.Mailbox)
	go func() { done <- b.advance() }()
	var live phase.Job
	require.Eventually(t, func() bool {
		b.exec.mu.Lock()
		defer b.exec.mu.Unlock()
		for _, j := range b.exec.jobs {
			if j.Input.Phase == phase.Development {
				live = j
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond)

	// The process "dies" here: recovery, on the same store, rebuilds the job of the running run.
	rx := &recoveringJobs{scriptedJobs: b.exec}
	var recovered phase.Job
	rx.recover = func(job phase.Job, wait bool) *phase.Outcome {
		recovered = job
		return nil // still running
	}
	m := mailbox.NewMachine(mailbox.Config{}, b.store, map[string]mailbox.Bot{"gl": {Forge: b.fake, Login: forgetest.BotLogin}},
		rx, b.clock.Now, nil)
	mb, err := b.store.Find(context.Background(), b.ref)
	require.NoError(t, err)
	running, err := m.RecoverRuns(context.Background(), mb)
	require.NoError(t, err)
	require.True(t, running)
	close(b.exec.block)
	<-done

	require.Equal(t, "development for #1: Export every report as XLSX", live.CommitMessage)
	require.Equal(t, live.CommitMessage, recovered.CommitMessage)
	require.Equal(t, live.Branch, recovered.Branch)
	require.Equal(t, live.SessionName, recovered.SessionName)
	require.Equal(t, live.RunID, recovered.RunID)
	require.Equal(t, live.Push, recovered.Push)
}

// busySlots is a RunSlots with every run worker busy (an event pass then says "queued").
type busySlots struct{}

func (busySlots) Idle() int  { return 0 }
func (busySlots) Limit() int { return 1 }

// The costly case of issue 25: a development run finished while Alfred was down, and the
// issue's own events (edits of Alfred's status comment, sent by the forge during the run) wait
// in the inbox. Start-up recovery collects the run; an event pass (which stops before a run)
// takes the mailbox first because of those events. The collected result must survive that
// pass and be applied once by the run pass, not thrown away and run again as attempt 2.
func TestRecoveredRunSurvivesPendingEventsAndAnEventPass(t *testing.T) {
	t.Parallel()
	b, m, rx, _ := crashedInDevelopment(t)
	sha := fmt.Sprintf("%040d", 9)
	rx.recover = func(job phase.Job, wait bool) *phase.Outcome {
		b.fake.SetBranch(repo, job.Branch, sha)
		return &phase.Outcome{Recovered: true, Container: "c", HeadSHA: sha,
			Result: &phase.Result{Summary: "Added the CSV export.", CommitMessage: "Add CSV export"}}
	}
	for range 3 { // Alfred's own status comment, edited during the run
		b.deliver(forge.Event{Type: forge.EventCommentEdited, Sender: forge.User{Login: forgetest.BotLogin},
			Comment: &forge.Comment{ID: 77, Body: "status"}})
	}
	ctx := context.Background()
	mb, err := b.store.Find(ctx, b.ref)
	require.NoError(t, err)
	_, err = m.RecoverRuns(ctx, mb)
	require.NoError(t, err)

	// The event worker's pass: it stops where a run is due, with the outcome still waiting.
	mb, err = b.store.Find(ctx, b.ref)
	require.NoError(t, err)
	_ = m.AdvanceEvents(ctx, mb, busySlots{})
	mb, err = b.store.Find(ctx, b.ref)
	require.NoError(t, err)
	require.Equal(t, mailbox.StateInDevelopment, mb.State)
	require.NotContains(t, b.lastComment(), "Queued", "a stored outcome waits for no run worker's turn to start")

	// The run worker's pass applies the stored outcome.
	mb = b.advanceWith(m)
	require.Equal(t, mailbox.StateInCI, mb.State, "the recovered result opened the merge request")
	require.Equal(t, sha, mb.HeadSHA)
	require.Zero(t, developmentJobs(b.exec), "the development run was not run again")
	pending, err := b.store.PendingEvents(ctx, mb.ID)
	require.NoError(t, err)
	require.Empty(t, pending, "the held events were applied after the outcome")
	b.requireUniqueMarkers()
}
