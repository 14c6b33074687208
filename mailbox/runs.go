package mailbox

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gosimple/slug"

	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// JobRunner runs the phase jobs the machine decides on, each in a disposable container;
// runner.Service implements it. The machine only decides which phase runs, with which input.
type JobRunner interface {
	// Execute prepares a worktree on job.Branch, runs the phase's agent in a container and,
	// when job.Push is set, commits what the agent changed with the bot identity and pushes the
	// branch. A run that fails (bad exit, no or invalid result, timeout) is reported in
	// phase.Outcome.Failure with a nil error; the error is for infrastructure failures (Docker or
	// git unavailable), after which the mailbox retries later. The container and worktree are
	// removed before Execute returns, whatever happened.
	Execute(ctx context.Context, job phase.Job) (*phase.Outcome, error)
	// Cleanup removes every container and worktree left for a mailbox (after a crash, or when
	// the mailbox closes). It returns nil when there is nothing to remove.
	Cleanup(ctx context.Context, mailboxID int64) error
	// RemoveSessions deletes the mailbox's agent session state. Called when the mailbox closes
	// (done, cancelled, issue gone) — never on blocked or a reclaimed lease, where the session
	// must survive.
	RemoveSessions(mailboxID int64) error
}

// cancelPollInterval is how often a running phase looks for an event that cancels it
// (the issue closed, the bot unassigned, the merge request closed).
const cancelPollInterval = 2 * time.Second

// runPhase runs the phase the state calls for (its row in the lifecycle table) and applies its
// result. Events already in the inbox are applied first, before the run starts and again
// before its result is acted on: an unassignment, a close, status::blocked or a closed merge
// request that arrived meanwhile wins, and the run's effects are not posted. A run's outcome is
// stored when it ends and applied from the store (applyRecovered), in the transaction that
// marks it applied: when acting on it fails (the forge answers 5xx opening the merge request),
// the next pass acts on the same outcome again instead of running the agent again.
func (m *Machine) runPhase(ctx context.Context, bot Bot, mb *Mailbox) error {
	state := mb.State
	in, repo, err := m.prepareRun(ctx, bot, mb)
	if err != nil || repo == nil {
		return err
	}
	if applied, err := m.applyRecovered(ctx, bot, mb, state, in, repo); applied || err != nil {
		return err
	}
	if changed, err := m.pendingFirst(ctx, bot, mb, state); changed || err != nil {
		return err
	}
	if ok, reason, err := m.withinBudget(ctx, mb); err != nil {
		return err
	} else if !ok {
		return m.block(ctx, bot, mb, onRunFailed, state, reason)
	}
	if reason, err := m.interruptedBudget(ctx, mb, in); err != nil || reason != "" {
		if err != nil {
			return err
		}
		return m.block(ctx, bot, mb, onRunFailed, state, reason)
	}
	if !mayStartRuns(ctx) {
		// The process drains (or every claim is paused) since this pass was claimed: an outcome
		// stored for the state was applied above; a new run waits for a claim after it.
		return errRunHeld
	}
	run, out, err := m.execute(ctx, bot, mb, in, *repo)
	if err == nil && out.Interrupted && !out.Detached {
		if by, err := m.store.CancelRequested(ctx, run.ID); err != nil || by != "" {
			if err != nil {
				return err
			}
			// An operator cancelled the run on the pages: the issue is told once (the block
			// comment), and a writer's retry runs the phase again.
			return m.blockCancelled(ctx, bot, mb, run.ID, run.Attempt, by)
		}
	}
	if err != nil || out.Interrupted {
		return err // interrupted: the cancelling event (or the next lease holder) decides what follows
	}
	if changed, err := m.pendingFirst(ctx, bot, mb, state); changed || err != nil {
		return err // the run stays unapplied; Advance discards it when the state moved on
	}
	_, err = m.applyRecovered(ctx, bot, mb, state, in, repo)
	return err
}

// InterruptedRunBudget is how many runs of one phase in a row may be interrupted by a stop of
// Alfred and run again: a run recovery ended interrupted (its agent never started, its
// container went away, no container of it was running) is run again, and when the phase's
// last InterruptedRunBudget runs all ended so, the mailbox is blocked with the reason instead
// of starting it once more (spec/reliability.md, "Exactly once across restarts and replicas").
const InterruptedRunBudget = 3

// interruptedBudget returns why the run of in may not start again (its phase's last
// InterruptedRunBudget runs were interrupted by stops of Alfred), "" when it may. A block for
// this reason marks the runs counted (Data.InterruptedBefore), so a writer's retry gives the
// phase a fresh budget.
func (m *Machine) interruptedBudget(ctx context.Context, mb *Mailbox, in phase.Input) (string, error) {
	runs, err := m.store.Runs(ctx, mb.ID)
	if err != nil {
		return "", err
	}
	n, last := interruptedInARow(runs, string(in.Phase), string(in.Step), mb.Data.InterruptedBefore)
	if n < InterruptedRunBudget {
		return "", nil
	}
	mb.Data.InterruptedBefore = last.ID
	key := phase.KeyOf(in.Phase, in.Step)
	m.log.Error("a run was interrupted too many times in a row; the mailbox is blocked", "mailbox_id", mb.ID,
		"run", key, "interrupted", n, "last_outcome", last.Outcome)
	return fmt.Sprintf("the %s run was interrupted %d times in a row before it could finish (Alfred stopped, or its container went away, each time; the last time: %s).",
		key, n, strings.TrimPrefix(last.Outcome, "interrupted: ")), nil
}

// interruptedUnknown is the outcome of a run interrupted where nothing could tell whether its
// agent ran (no runner to ask, no container records): such a run ends a streak instead of
// counting, and a pass that keeps stopping the process is blocked by the lease attempts
// (Machine.Advance, PoisonAttempts) instead.
const interruptedUnknown = "interrupted: the worker running it stopped"

// interruptedInARow counts the latest runs of phase and step in runs (oldest first) that
// recovery ended interrupted (outcome "interrupted: <reason>"), back to the last run of that
// phase and step that ended otherwise or to run after, and returns the latest of them.
func interruptedInARow(runs []Run, ph, step string, after int64) (n int, last Run) {
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if r.Phase != ph || r.Step != step {
			continue
		}
		if r.ID <= after || r.Status != RunInterrupted || !strings.HasPrefix(r.Outcome, "interrupted: ") ||
			r.Outcome == interruptedUnknown {
			break
		}
		if n == 0 {
			last = r
		}
		n++
	}
	return n, last
}

// pendingFirst applies the events waiting in the inbox and reports whether they moved the
// mailbox away from state.
func (m *Machine) pendingFirst(ctx context.Context, bot Bot, mb *Mailbox, state State) (bool, error) {
	if _, err := m.applyEvents(ctx, bot, mb); err != nil {
		return true, err
	}
	if mb.State != state {
		m.log.Info("an event in the inbox changed the mailbox before the run's turn", "mailbox_id", mb.ID,
			"from", state, "to", mb.State)
		return true, nil
	}
	return false, nil
}

// prepareRun reads the issue and the repository, freezes the branch at the first run, writes
// the status label and saves the mailbox due at once, so the next lease holder redoes the run
// if this process dies during it. It returns the run's input; a nil repository (and nil
// error) when the issue turned out closed and the mailbox is done.
func (m *Machine) prepareRun(ctx context.Context, bot Bot, mb *Mailbox) (phase.Input, *forge.Repository, error) {
	d := def(mb.State)
	in := phase.Input{Phase: d.Phase, Step: d.Step, Type: mb.Type, Decisions: mb.Data.Decisions,
		FreeText: mb.Data.FreeText, Plan: mb.Data.Plan}
	if d.Phase == phase.CIFix {
		in.CILog = mb.Data.CILog
	}
	issue, err := bot.Forge.Issue(ctx, mb.Ref())
	if err != nil {
		return in, nil, fmt.Errorf("read issue: %w", err)
	}
	if issue.State == "closed" {
		_, err := m.done(ctx, bot, mb, onIssueClosed, "the issue was closed")
		return in, nil, err
	}
	in.Title, in.Description = issue.Title, issue.Body
	if fa, ok := Section(issue.Body, sectionFunctional); ok {
		in.Analysis = fa
	}
	if d.Phase == phase.Review {
		// A merge request not the bot's: its source branch is the mailbox's branch.
		if err := m.reviewInput(ctx, bot, mb, &in); err != nil {
			return in, nil, err
		}
	}
	// The branch (and with it the session name) is frozen at the first run of the mailbox.
	if mb.Branch == "" {
		mb.Branch = BranchName(m.settings(mb.Repo).BranchPrefix, mb.Number, issue.Title)
	}
	repo, err := bot.Forge.Repository(ctx, mb.Repo)
	if err != nil {
		return in, nil, fmt.Errorf("read repository: %w", err)
	}
	switch d.Phase {
	case phase.ReviewFix:
		// A stored outcome of the run waits to be acted on (a pass failed after it): the run
		// was counted when it started.
		prev, err := m.store.UnappliedRun(ctx, mb.ID, string(d.Phase), string(d.Step))
		if err != nil {
			return in, nil, err
		}
		if prev != nil && prev.Status == RunSucceeded && prev.Result != "" {
			// Its outcome is acted on with the comments the run was given (Data.ReviewComments,
			// saved when it started), not with those the forge shows now: a pass that failed
			// after posting its replies left them answered, and they would be read as done,
			// the summary, the resolved threads and the pushed head with them.
			break
		}
		if due, err := m.reviewFixInput(ctx, bot, mb, &in, repo, prev == nil); err != nil || !due {
			if err == nil {
				err = m.follow(ctx, bot, mb, onAnswered) // every comment is answered already
			}
			return in, nil, err
		}
	case phase.ConflictResolution:
		in.Conflict = &phase.ConflictInput{Target: repo.DefaultBranch}
	case phase.SelfReview:
		m.selfReviewInput(bot, mb, &in, repo)
	}
	if err := m.setState(ctx, bot, mb, mb.State); err != nil {
		return in, nil, err
	}
	now := m.now()
	mb.WakeAt = &now
	if err := m.store.Save(ctx, mb); err != nil {
		return in, nil, err
	}
	return in, repo, nil
}

// execute records a new run, hands its job to the JobRunner (stopped early by a cancelling
// event) and records how it ended.
func (m *Machine) execute(ctx context.Context, bot Bot, mb *Mailbox, in phase.Input, repo forge.Repository) (*Run, *phase.Outcome, error) {
	run := &Run{MailboxID: mb.ID, Phase: string(in.Phase), Step: string(in.Step)}
	if err := m.store.StartRun(ctx, run); err != nil {
		return nil, nil, err
	}
	job := m.jobFor(mb, *run, in, repo)
	if mb.Data.FirstRunAt.IsZero() {
		mb.Data.FirstRunAt = run.StartedAt
	}
	m.postProgress(ctx, bot, mb, in.Phase, run.StartedAt)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go m.watchCancel(runCtx, stop, bot, mb, run.ID)
	m.log.Info("run started", "mailbox_id", mb.ID, "phase", in.Phase, "step", in.Step, "attempt", run.Attempt)
	if run.Rerun {
		m.log.Error("a phase runs again for one decision: an earlier run is still recorded running or its result was never applied",
			"mailbox_id", mb.ID, "phase", in.Phase, "step", in.Step, "run_id", run.ID)
	}
	out, err := m.jobs.Execute(runCtx, job)
	if err == nil && out.Detached {
		// Shutdown: the container keeps running; the run stays "running" for the next
		// process's recovery to reattach.
		m.log.Info("run left running for the next process", "mailbox_id", mb.ID, "run_id", run.ID, "container", out.Container)
		return run, out, nil
	}
	if err != nil && runCtx.Err() != nil && ctx.Err() == nil {
		// Stopped by the watch, not by a shutdown: an operator's cancel that landed while the
		// runner committed or pushed (the container had ended) fails that step, not the
		// container. It is the interrupted run a cancel makes, so that runPhase blocks the issue
		// instead of failing the pass and running the phase again.
		if by, cerr := m.store.CancelRequested(ctx, run.ID); cerr == nil && by != "" {
			// Plain "interrupted", as a cancel of a running container records: not one of the
			// interruptions by Alfred stopping that InterruptedRunBudget counts.
			run.Status, run.Outcome, run.Applied = RunInterrupted, "interrupted", true
			if ferr := m.store.FinishRun(context.WithoutCancel(ctx), run); ferr != nil {
				return nil, nil, ferr
			}
			return run, &phase.Outcome{Interrupted: true}, nil
		}
	}
	if err != nil {
		run.Status, run.Outcome = RunInterrupted, "infrastructure error: "+m.cfg.Redact(err.Error())
		_ = m.store.FinishRun(context.WithoutCancel(ctx), run)
		return nil, nil, fmt.Errorf("execute %s: %w", job.Input.Key, err)
	}
	code := out.ExitCode
	run.ExitCode, run.Container, run.Output, run.HeadSHA = &code, out.Container, out.Output, out.HeadSHA
	if out.Result != nil {
		b, _ := json.Marshal(out.Result)
		run.Result = string(b)
	}
	run.Applied = false // acted on from the store, see runPhase
	switch {
	case out.Interrupted:
		run.Status, run.Outcome, run.Applied = RunInterrupted, "interrupted", true
		run.Resumable, run.NotResumableReason = out.Resumable, out.NotResumableReason
	case out.Failure != "":
		run.Status, run.Outcome = RunFailed, out.Failure
	default:
		run.Status, run.Outcome = RunSucceeded, "ok"
	}
	// The outcome is stored with its pushed commit before anything is done with it.
	changed, err := m.store.FinishRecoveredRun(context.WithoutCancel(ctx), run)
	if err != nil {
		return nil, nil, err
	}
	if !changed {
		// Another worker recovered the run meanwhile (this pass's lease expired and the
		// mailbox was claimed): the outcome it stored is its to act on, not this copy.
		return nil, nil, fmt.Errorf("run %d was recovered by another worker: %w", run.ID, ErrLeaseLost)
	}
	m.log.Info("run finished", "mailbox_id", mb.ID, "phase", in.Phase, "status", run.Status, "outcome", run.Outcome)
	return run, out, nil
}

// jobFor builds the job of run r of the mailbox: the one place a phase.Job is made, for a live
// run (in carries the issue as just read and the decisions) and for a run recovery finds again
// (in is empty), so both name the same branch, session and commit message. The commit message
// names the issue by the title the mailbox knows (kept current by the issue's events). A job of
// a project in shadow mode never pushes: shadow mode starts no run that pushes (shadowPark), and
// a run of that kind started live and recovered after the switch is collected without its push.
func (m *Machine) jobFor(mb *Mailbox, r Run, in phase.Input, repo forge.Repository) phase.Job {
	in.Phase, in.Step, in.Attempt = phase.Phase(r.Phase), phase.Step(r.Step), r.Attempt
	in.Agent = cmp.Or(in.Agent, m.settings(mb.Repo).agent(in.Phase))
	in.Key = phase.KeyOf(in.Phase, in.Step)
	in.Repo, in.Issue, in.Title, in.Branch = mb.Repo, mb.Number, cmp.Or(in.Title, mb.Title), mb.Branch
	job := phase.Job{MailboxID: mb.ID, RunID: r.ID, Attempt: r.Attempt, Rerun: r.Rerun, ForgeName: mb.Forge,
		Repository: repo, Branch: mb.Branch, Input: in, Push: !in.Phase.ReadOnly() && !m.settings(mb.Repo).Shadow,
		CommitMessage: fmt.Sprintf("%s for #%d: %s", in.Phase, mb.Number, mb.Title)}
	if m.cfg.SessionResume == nil || m.cfg.SessionResume(mb.Repo) {
		// The session is named after the branch, frozen with it; a merge request not the
		// bot's has its own, named after its source branch.
		job.SessionName = mb.Branch
	}
	return job
}

// watchCancel stops a running phase when an event that cancels it arrives from someone the gate
// allows it (cancelAllowed) or an operator asks to cancel run runID (Controls.CancelRequested).
func (m *Machine) watchCancel(ctx context.Context, stop func(), bot Bot, mb *Mailbox, runID int64) {
	t := time.NewTicker(cancelPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if by, err := m.store.CancelRequested(ctx, runID); err == nil && by != "" {
			m.log.Info("stopping the run: an operator cancelled it", "mailbox_id", mb.ID, "run_id", runID)
			stop()
			return
		}
		evs, err := m.store.PendingEvents(ctx, mb.ID)
		if err != nil {
			continue
		}
		for _, e := range evs {
			if !cancels(e.Event, bot, mb, m.cfg.Labels.Blocked) {
				continue
			}
			// The gate first: a refused input stops nothing (its pass refuses it once the run
			// ends); a role not read now is read again at the next poll.
			if ok, err := m.cancelAllowed(ctx, bot, mb, e.Event); err != nil || !ok {
				continue
			}
			m.log.Info("stopping the run: a cancelling event arrived", "mailbox_id", mb.ID, "event", e.Event.Type)
			stop()
			return
		}
	}
}

// applyResult acts on the successful result of the run state called for: what each phase's
// result means is procedural, where it leads is the table's.
func (m *Machine) applyResult(ctx context.Context, bot Bot, mb *Mailbox, state State, out *phase.Outcome, repo *forge.Repository, attempt int, runID int64) error {
	r := out.Result
	d := def(state)
	switch {
	case d.Phase == phase.Analysis && d.Step == phase.StepFunctional:
		return m.applyFunctional(ctx, bot, mb, r)
	case d.Phase == phase.Analysis:
		mb.Data.Plan = r.Plan
		body := fmt.Sprintf("## Technical plan\n\n%s\n\nAdd the `%s` label to let me start the development.",
			strings.TrimSpace(r.Plan), m.cfg.Labels.ValidatePlan)
		if err := m.post(ctx, bot, mb, fmt.Sprintf("plan-%d", mb.Data.Round), "plan", body); err != nil {
			return err
		}
		return m.follow(ctx, bot, mb, onPlanPosted)
	case d.Phase == phase.ReviewFix:
		return m.applyReviewFix(ctx, bot, mb, state, out, runID)
	case d.Phase == phase.ConflictResolution:
		return m.applyMerge(ctx, bot, mb, out)
	case d.Phase == phase.Review:
		return m.applyReview(ctx, bot, mb, r, runID)
	case d.Phase == phase.SelfReview:
		return m.applySelfReview(ctx, bot, mb, r)
	case d.Phase == phase.Answer:
		if err := m.post(ctx, bot, mb, fmt.Sprintf("answer-%d", mb.Data.Round), "answer", strings.TrimSpace(r.Answer)); err != nil {
			return err
		}
		return m.follow(ctx, bot, mb, onAnswerPosted)
	case !d.Phase.ReadOnly():
		return m.applyPush(ctx, bot, mb, state, out, repo, attempt)
	}
	return nil
}

// applyPush acts on a read-write run: nothing pushed blocks; otherwise the first push opens
// the merge request and a later one (ci_fix) says what it fixed, and CI is awaited. A run that
// is not the phase's first and pushed nothing may follow one that pushed and was then
// interrupted (the process killed between the push and the merge request): the branch already
// holds the work, so the merge request is opened from it; only a forge that refuses it (no
// difference with the target) blocks.
func (m *Machine) applyPush(ctx context.Context, bot Bot, mb *Mailbox, state State, out *phase.Outcome, repo *forge.Repository, attempt int) error {
	nothing := fmt.Sprintf("the %s run changed no file, so there is nothing to push.", def(state).runKey())
	if out.HeadSHA == "" && (attempt <= 1 || mb.MRNumber != 0) {
		return m.block(ctx, bot, mb, onNothingPushed, state, nothing)
	}
	m.setHead(mb, cmp.Or(out.HeadSHA, mb.HeadSHA))
	if mb.MRNumber == 0 {
		// The agent's summary and the issue's title are not Alfred's: a closing keyword in them
		// would close another issue at the merge (forge.DefuseClosingReferences).
		body := fmt.Sprintf("Closes #%d\n\n%s", mb.Number, defuseAgentText(m.cfg.Redact(strings.TrimSpace(out.Result.Summary))))
		mr, err := bot.Forge.CreateMergeRequest(ctx, mb.Repo, forge.NewMergeRequest{
			SourceBranch: mb.Branch, TargetBranch: repo.DefaultBranch, Title: forge.DefuseClosingReferences(mb.Title), Body: body})
		if out.HeadSHA == "" && (errors.Is(err, forge.ErrConflict) || errors.Is(err, forge.ErrNotFound)) {
			return m.block(ctx, bot, mb, onNothingPushed, state, nothing)
		}
		if err != nil {
			return fmt.Errorf("open the merge request: %w", err)
		}
		m.setHead(mb, cmp.Or(mb.HeadSHA, mr.HeadSHA))
		mb.MRNumber = mr.Number
		msg := fmt.Sprintf("I opened %s from `%s`.", m.mrRef(bot, mr.Number), mb.Branch)
		if mr.WebURL != "" {
			msg += " " + mr.WebURL
		}
		if err := m.post(ctx, bot, mb, fmt.Sprintf("mr-%d", mb.Data.Round), "merge_request", msg); err != nil {
			return err
		}
	} else {
		msg := fmt.Sprintf("I pushed a fix for the failed CI (attempt %d of %d) as %s.",
			mb.Data.CIAttempts, m.settings(mb.Repo).CIFixAttempts, short(out.HeadSHA))
		if err := m.post(ctx, bot, mb, "cifix-"+out.HeadSHA, "ci_fix", msg); err != nil {
			return err
		}
	}
	mb.Data.CIWaitUntil = m.now().Add(m.cfg.CIWait)
	return m.afterPush(ctx, bot, mb, state)
}

// setHead records sha as the merge request's head, set now by the machine (a run's push).
func (m *Machine) setHead(mb *Mailbox, sha string) {
	if mb.HeadSHA != "" && mb.HeadSHA != sha && !slices.Contains(mb.Data.ReplacedHeads, mb.HeadSHA) {
		mb.Data.ReplacedHeads = append(mb.Data.ReplacedHeads, mb.HeadSHA)
		if n := len(mb.Data.ReplacedHeads); n > maxReplacedHeads {
			mb.Data.ReplacedHeads = slices.Clone(mb.Data.ReplacedHeads[n-maxReplacedHeads:])
		}
	}
	mb.HeadSHA, mb.Data.HeadSetAt = sha, m.now()
}

// maxReplacedHeads bounds Data.ReplacedHeads: the heads Alfred's pushes replaced that a late
// delivery (a forge's retry, hours later) may still name.
const maxReplacedHeads = 32

// staleHead reports whether ev names a merge request head that is not the mailbox's and is
// about an older commit: received before the machine set the current head, or a head Alfred's
// own push replaced (Data.ReplacedHeads: a forge's retry of an old delivery, whenever it comes).
func staleHead(mb *Mailbox, ev forge.Event, sha string) bool {
	if sha == "" || sha == mb.HeadSHA {
		return false
	}
	return slices.Contains(mb.Data.ReplacedHeads, sha) || (!ev.ReceivedAt.IsZero() && ev.ReceivedAt.Before(mb.Data.HeadSetAt))
}

// BranchName returns "{prefix}issue-{number}-{slug of the title}", the slug transliterated to
// ASCII and cut at 40 characters on a word boundary.
func BranchName(prefix string, number int64, title string) string {
	s := slug.Make(title)
	if len(s) > 40 {
		s = s[:40]
		if i := strings.LastIndex(s, "-"); i > 10 {
			s = s[:i]
		}
	}
	name := fmt.Sprintf("%sissue-%d", prefix, number)
	if s != "" {
		name += "-" + s
	}
	return name
}
