package metrics

import (
	"context"
	"time"

	"github.com/alfred-bot/alfred/runner/phase"
)

// Jobs is the runner as the mailbox machine calls it (mailbox.JobRunner).
type Jobs interface {
	Execute(ctx context.Context, job phase.Job) (*phase.Outcome, error)
	Cleanup(ctx context.Context, mailboxID int64) error
	RemoveSessions(mailboxID int64) error
}

// InstrumentJobs returns inner with every Execute counted: alfred_phase_runs_started_total and
// alfred_phase_reruns_total (phase.Job.Rerun) by phase when it starts, alfred_runs_total by phase and
// outcome, alfred_run_duration_seconds, and the run's tokens and cost by adapter from its
// session record. When inner also recovers runs (Recover), so does the result, and the runs it
// collects are counted too (their duration is the wait after the restart).
func (m *Metrics) InstrumentJobs(inner Jobs) Jobs {
	if m == nil {
		return inner
	}
	c := &countedJobs{Jobs: inner, m: m}
	if r, ok := inner.(recoverer); ok {
		return &countedRecoverer{countedJobs: c, r: r}
	}
	return c
}

// recoverer is the runner's Recover (mailbox.RunRecoverer): the outcome of a run a stopped
// process left, nil while its container still runs.
type recoverer interface {
	Recover(ctx context.Context, job phase.Job, wait bool) (*phase.Outcome, error)
}

// countedRecoverer keeps the inner runner's Recover visible (the machine asks for it by type)
// and counts the runs it collects.
type countedRecoverer struct {
	*countedJobs
	r recoverer
}

func (c *countedRecoverer) Recover(ctx context.Context, job phase.Job, wait bool) (*phase.Outcome, error) {
	start := time.Now()
	out, err := c.r.Recover(ctx, job, wait)
	if out != nil || err != nil {
		c.m.Outcome(string(job.Input.Phase), out, err, time.Since(start))
	}
	return out, err
}

type countedJobs struct {
	Jobs
	m *Metrics
}

func (c *countedJobs) Execute(ctx context.Context, job phase.Job) (*phase.Outcome, error) {
	c.m.RunStarted(string(job.Input.Phase), job.Rerun)
	start := time.Now()
	out, err := c.Jobs.Execute(ctx, job)
	c.m.Outcome(string(job.Input.Phase), out, err, time.Since(start))
	return out, err
}

// Outcome counts one finished run of phase from its outcome (or the infrastructure error that
// ended it) and its duration, and what was refused of its output (alfred_hostile_output_total
// by reason, phase.Outcome.HostileOutput). A run recovery collected is counted the same way. Every run
// whose agent ran (out.Adapter) adds its tokens and either its cost or one unrated run: from
// its session record, else from its result; a run whose agent did not run counts neither.
func (m *Metrics) Outcome(phaseName string, out *phase.Outcome, err error, d time.Duration) {
	if m == nil {
		return
	}
	outcome := RunSucceeded
	switch {
	case err != nil || out == nil:
		outcome = RunError
	case out.Interrupted:
		outcome = RunInterrupted
	case out.Failure != "":
		outcome = RunFailed
	}
	m.Run(phaseName, outcome, d)
	if out == nil {
		return
	}
	for _, r := range out.HostileOutput {
		m.hostile.WithLabelValues(r).Inc()
	}
	switch s, r := out.Session, out.Result; {
	case s != nil:
		m.Usage(s.Adapter, s.TokensIn, s.TokensOut, s.CostUSD, s.ReportedCost > 0)
	case out.Adapter != "" && r != nil:
		// No session record (sessions off, an adapter without sessions): the result's usage.
		m.Usage(out.Adapter, r.InputTokens, r.OutputTokens, r.CostUSD, r.CostUSD > 0)
	case out.Adapter != "":
		m.Usage(out.Adapter, 0, 0, 0, false) // the run failed before reporting: its cost is unknown
	}
}
