package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Reattached is what Executor.Reattach found for one container record.
type Reattached struct {
	// Gone is true when the run cannot be collected: its container vanished (or its name is
	// held by a container that is not the run's), was created but never started (the agent
	// never ran; the container is removed), or its run directory was lost. Reason says
	// which; the container record is then in status error.
	Gone   bool
	Reason string
	// StillRunning is true when the container runs and the caller asked not to wait, or the
	// wait ended with phase.ErrDetach; nothing was changed.
	StillRunning bool
	// Outcome is the collected run (exit, redacted output, the adapter's Result), as
	// Executor.Run would have returned it, when neither Gone nor StillRunning.
	Outcome *RunOutcome
	// Input is the run's input as it was given to the agent (session id and resume included),
	// read back from the run directory, when Outcome is set.
	Input phase.Input
}

// Reattach finds again the container of a container record left live (starting or ready) by
// a process that stopped, and finishes the run the way Run would have: it adopts the container
// (Runtime.Adopt, by id, or by name when the id was never recorded), then collects it with the
// same collect as Run — waiting for it when it still runs and wait is set (within what is left
// of the run's timeout, renewing the record's heartbeat), reading its logs and the adapter's
// Result from the run's output directory — and explicitly destroys the adopted container,
// removes the run directory and ends the record (stopped, or error when the container is gone).
//
// The adapter is the one the record names (its configured agent name), else the one bound to
// the run's phase. When ctx ends while waiting, the container is stopped and the outcome is
// StatusCanceled, as for a run; when it ends with phase.ErrDetach (Alfred shutting down), the
// container, its run directory and its record are left as they were and StillRunning is
// reported, as a live run detaches. The error is for an adoption failure, and, as in Run, for a
// Runtime failure while waiting or reading the logs (collect); after a failed collect the
// adopted container is removed and its record ended all the same.
func (e *Executor) Reattach(ctx context.Context, rec ContainerRecord, wait bool) (*Reattached, error) {
	life := e.adoptContainer(rec)
	runDir := e.RunDir(rec.ContainerName)
	gone := func(reason string) (*Reattached, error) {
		cctx, cancel := e.cleanupCtx(ctx)
		defer cancel()
		err := errors.Join(life.end(cctx, ContainerError, reason), os.RemoveAll(runDir))
		return &Reattached{Gone: true, Reason: reason}, err
	}
	ref := rec.ContainerID
	if ref == "" {
		ref = rec.ContainerName
	}
	h, err := e.cfg.Runtime.Adopt(ctx, ref)
	switch {
	case errors.Is(err, ErrContainerNotFound):
		return gone(fmt.Sprintf("its container %s was removed while Alfred was not running", rec.ContainerName))
	case errors.Is(err, ErrNotManaged):
		return gone(fmt.Sprintf("the name %s is held by a container that is not Alfred's (left alone)", rec.ContainerName))
	case err != nil:
		return nil, fmt.Errorf("reattach %s: %w", rec.ContainerName, err)
	}
	if h.Labels[LabelRun] != strconv.FormatInt(rec.RunID, 10) {
		return gone(fmt.Sprintf("the name %s is held by a container of another run (%s=%q, left alone)",
			rec.ContainerName, LabelRun, h.Labels[LabelRun]))
	}
	if h.Running && !wait {
		return &Reattached{StillRunning: true}, nil
	}
	if !h.Running && h.StartedAt.IsZero() {
		// Created but never started (the process stopped between create and start): the agent
		// never ran, so there is nothing to collect and nothing failed; the run is run again.
		cctx, cancel := e.cleanupCtx(ctx)
		defer cancel()
		err := e.cfg.Runtime.Destroy(cctx, h.ID)
		r, endErr := gone(fmt.Sprintf("its container %s was created but never started", rec.ContainerName))
		return r, errors.Join(err, endErr)
	}

	// From here the recovery has decided: the adopted container is removed once collected.
	teardown := func(out *RunOutcome) {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout+e.cfg.StopGrace)
		defer cancel()
		destroyErr := e.cfg.Runtime.Destroy(cctx, h.ID)
		var errs []error
		if destroyErr != nil {
			errs = append(errs, fmt.Errorf("destroy adopted container: %w", destroyErr))
		}
		if err := os.RemoveAll(runDir); err != nil {
			errs = append(errs, fmt.Errorf("remove run dir: %w", err))
		}
		out.CleanupErr = errors.Join(errs...)
		status, msg := endStatus(out, destroyErr)
		out.RecordErr = errors.Join(out.RecordErr, life.end(cctx, status, "recovered after a restart: "+msg))
	}
	in, agent, inErr := e.recoveredInput(rec, runDir)
	if inErr != nil {
		cctx, cancel := e.cleanupCtx(ctx)
		defer cancel()
		err := e.cfg.Runtime.Destroy(cctx, h.ID)
		r, endErr := gone(inErr.Error())
		return r, errors.Join(err, endErr)
	}

	out := &RunOutcome{Name: h.Name, ID: h.ID, Agent: agent.Name(), Started: h.StartedAt}
	if out.Started.IsZero() {
		out.Started = rec.CreatedAt
	}
	if rec.Status == ContainerStarting || rec.ContainerID == "" {
		out.RecordErr = life.ready(ctx, h.ID)
	}
	defer func() {
		if out.Status != StatusDetached {
			teardown(out)
		}
	}()

	c := collection{h: h, agent: agent, in: in, outDir: filepath.Join(runDir, "out"), limit: e.cfg.Timeout, life: life}
	if h.Running {
		// What is left of the run's time limit.
		c.wait = max(e.cfg.Timeout-time.Since(out.Started), time.Millisecond)
	} else {
		// An exited container answers at once. One the runtime reports not running without an
		// end it can read (a Pod terminating on a lost node keeps its last status) is not waited
		// on for ever: past cleanupTimeout (or the run's time limit, when shorter) it is stopped
		// and removed as a run out of time.
		c.wait = min(cleanupTimeout, max(e.cfg.Timeout, time.Millisecond))
		c.limit = c.wait
	}
	if err := e.collect(ctx, c, out); err != nil {
		return nil, fmt.Errorf("reattach %s: %w", h.Name, err)
	}
	if out.Status == StatusDetached {
		// Alfred is shutting down (ctx ended with phase.ErrDetach): the container, its run
		// directory and its record stay for the next process, as a live run's do.
		return &Reattached{StillRunning: true}, nil
	}
	return &Reattached{Outcome: out, Input: in}, nil
}

// recoveredInput reads the run's input.json back from its run directory and resolves the
// adapter that ran it (the recorded one, else the phase's binding).
func (e *Executor) recoveredInput(rec ContainerRecord, runDir string) (phase.Input, Agent, error) {
	var in phase.Input
	b, err := os.ReadFile(filepath.Join(runDir, "in", "input.json"))
	if err != nil {
		return in, nil, fmt.Errorf("the run directory of %s was lost while Alfred was not running", rec.ContainerName)
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return in, nil, fmt.Errorf("the input of %s is unreadable: %v", rec.ContainerName, err)
	}
	agent, ok := e.cfg.Agents[rec.Adapter]
	if !ok {
		if _, agent, ok = e.Agent(in); !ok {
			return in, nil, fmt.Errorf("no adapter %q (nor one bound to %s) to read the result of %s", rec.Adapter, in.Phase, rec.ContainerName)
		}
	}
	return in, agent, nil
}

// RemoveOrphans destroys every Alfred-managed container (LabelManaged=true) that no live
// container record accounts for: containers whose run was never recorded or has ended. Containers
// are listed before the rows are read, and a row is always written before its container is
// created, so a container another process is starting is never taken for an orphan. Without
// a ContainerLog it does nothing. A version detection that still runs (another replica's) is
// kept. It returns the names destroyed.
func (e *Executor) RemoveOrphans(ctx context.Context) ([]string, error) {
	if e.cfg.ContainerLog == nil {
		return nil, nil
	}
	list, err := e.cfg.Runtime.List(ctx, e.ManagedLabels(nil))
	if err != nil {
		return nil, fmt.Errorf("remove orphans: %w", err)
	}
	live, err := e.cfg.ContainerLog.LiveContainers(ctx)
	if err != nil {
		return nil, fmt.Errorf("remove orphans: %w", err)
	}
	known := map[string]bool{}
	for _, r := range live {
		known[r.ContainerName] = true
		if r.ContainerID != "" {
			known[r.ContainerID] = true
		}
	}
	return e.destroyAll(ctx, "remove orphan", list, func(c Container) bool {
		return known[c.Name] || known[string(c.ID)] || (c.Running && unrecorded(c.Labels))
	})
}

// DoctorPhase is the LabelPhase of the containers `alfred doctor` runs to check an agent's
// image (as a run's Pod or container would run it).
const DoctorPhase = "doctor"

// unrecorded reports whether labels are those of a short container that never has a container
// record: a CLI version detection (Service.detect) or a doctor's check (DoctorPhase), which
// another replica or `alfred doctor` sharing the runtime may be running while this one starts.
// The sweeps keep it while it runs.
func unrecorded(labels map[string]string) bool {
	return labels[LabelPhase] == detectPhase || labels[LabelPhase] == DoctorPhase
}

// Recover finishes a run whose worker stopped (the process was killed) while the run was in
// progress; job is the run as the mailbox would have asked for it. It finds the run's live
// container record and, through Executor.Reattach:
//
//   - no live row (the worker stopped before the container was created, or after it was
//     removed), the container is gone, or it was created but never started (the agent never
//     ran): an Interrupted outcome with InterruptReason — the mailbox runs the phase again by
//     its normal rules; only a container that started and ended without a result is a failure;
//   - the container exited while Alfred was down, or still runs (wait set: waited for within
//     the run's timeout): its result is collected through the adapter, and for read-write
//     phases the worktree the agent changed is committed and pushed as Execute would have;
//     the outcome has Recovered set;
//   - the container still runs and wait is false: (nil, nil), nothing changed.
//
// Interrupted outcomes carry the session hook: Resumable, or NotResumableReason. The error is
// for infrastructure failures (Docker, git); the run stays as it is and recovery can be
// retried.
func (s *Service) Recover(ctx context.Context, job phase.Job, wait bool) (*phase.Outcome, error) {
	name := ContainerName(job.MailboxID, job.RunID, job.Input.Phase, job.Attempt)
	interrupted := func(reason string) *phase.Outcome {
		out := &phase.Outcome{Interrupted: true, Recovered: true, Container: name, InterruptReason: reason}
		out.Resumable, out.NotResumableReason = s.resumable(job)
		return out
	}
	xlog := s.exec.cfg.ContainerLog
	if xlog == nil {
		return interrupted("the worker running it stopped"), nil
	}
	recs, err := xlog.RunContainers(ctx, job.RunID)
	if err != nil {
		return nil, err
	}
	var live []ContainerRecord
	for _, r := range recs {
		if r.Status.Live() {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return interrupted("the worker running it stopped while no container of the run was running"), nil
	}
	// One container per run is live at a time; an older live row is superseded by the newest.
	for _, r := range live[:len(live)-1] {
		if _, err := s.exec.Reattach(ctx, r, false); err != nil {
			return nil, err
		}
	}
	rec := live[len(live)-1]
	r, err := s.exec.Reattach(ctx, rec, wait)
	if err != nil {
		return nil, err
	}
	if r.StillRunning {
		return nil, nil
	}

	mgr := s.git[job.ForgeName]
	var wt *gitrepo.Worktree
	if mgr != nil {
		// The mailbox's worktree as the run left it; it stays for the mailbox's next run.
		wt, err = mgr.Reopen(ctx, WorktreeName(job.MailboxID))
		if err != nil && !errors.Is(err, gitrepo.ErrWorktreeNotFound) {
			return nil, err
		}
	}
	if r.Gone {
		return interrupted(r.Reason), nil
	}
	out := r.Outcome
	if out.CleanupErr != nil || out.RecordErr != nil {
		s.log.Warn("recovered run not fully cleaned up", "container", out.Name, "cleanup_err", out.CleanupErr, "record_err", out.RecordErr)
	}
	if out.Status == StatusCanceled {
		return interrupted("stopped while waiting for its recovered container: " + out.Err.Error()), nil
	}
	res := &phase.Outcome{ExitCode: out.Exit.Code, Container: out.Name, Output: joinOutput(out), Recovered: true,
		Adapter: rec.Adapter}
	if p := s.recoveredPlan(ctx, job, r.Input); p != nil {
		res.Session = s.record(ctx, job, p, out) // the session chain goes on across the restart
	}
	if job.Push && out.Status == StatusSucceeded && wt == nil {
		return interrupted(fmt.Sprintf("its worktree %s was removed while Alfred was not running, so the agent's changes are lost", WorktreeName(job.MailboxID))), nil
	}
	return s.finish(ctx, job, mgr, wt, out, res)
}

// resumable is the session hook of an interrupted run: whether the next run can continue the
// agent session, or why not.
func (s *Service) resumable(job phase.Job) (bool, string) {
	name, agent, ok := s.exec.Agent(job.Input)
	switch {
	case !ok:
		return false, fmt.Sprintf("no adapter is bound to the %s phase", job.Input.Phase)
	case job.SessionName == "":
		return false, "agent sessions are off for this mailbox"
	}
	sa, ok := agent.(SessionAgent)
	if !ok || !sa.Capabilities().ResumableSessions {
		return false, fmt.Sprintf("the %s adapter cannot resume sessions", name)
	}
	return true, ""
}

// RemoveOrphans destroys the managed containers no live container record accounts for (see
// Executor.RemoveOrphans) and returns their names.
func (s *Service) RemoveOrphans(ctx context.Context) ([]string, error) {
	return s.exec.RemoveOrphans(ctx)
}
