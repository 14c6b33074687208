package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/alfred-bot/alfred/internal/base/textwalk"
	"github.com/alfred-bot/alfred/runner/phase"
)

// APIAgent is an adapter of API mode (runner/agent/apimode): it runs a read-only phase in
// Alfred's own process through a model provider's API, with no container, no CLI and no
// session. The model sees the repository only through read-only tools the adapter executes on
// the run's worktree. The Executor calls RunAPI instead of compiling a container; Command and
// Result of the embedded Agent are never called for it (they return ErrAPIMode).
type APIAgent interface {
	Agent
	// RunAPI runs one phase: the tool loop over run.Worktree, bounded by the adapter's turns
	// and tokens and by ctx (the run's wall-clock limit). The report holds the usage the
	// provider reported and the run's log (turns, tool calls, provider errors in the
	// provider's words) even when the error is not nil. The error is why the run failed: a
	// provider error, a loop that reached its bound, or a result that breaks the contract
	// (wrapping phase.ErrInvalidResult or phase.ErrNoResult); ctx's error when ctx ended.
	RunAPI(ctx context.Context, run APIRun) (APIReport, error)
	// Model returns the model a run of in uses (in.Model, else the adapter's own).
	Model(in phase.Input) string
}

// APIRun is one run of an APIAgent.
type APIRun struct {
	// Input is the run's input, Attempt and Key filled.
	Input phase.Input
	// Worktree is the absolute host path of the mailbox's worktree; the tools read below it
	// only.
	Worktree string
}

// APIReport is what an API-mode run did.
type APIReport struct {
	// Result is the validated result; nil when the run failed.
	Result *phase.Result
	// Log is the run's account, one line per turn and tool call (not yet censored).
	Log string
	// Turns counts the model calls made.
	Turns int
	// Usage is the provider's usage over all turns.
	Usage Usage
}

// Usage is what a run consumed, as the model provider reported it: tokens (counts) and cost
// in US dollars from the configured price table. Rated is false when the model has no price
// (the cost is then unknown, not zero).
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	Rated        bool    `json:"rated"`
}

// ErrAPIMode is returned by the container methods of an APIAgent (Command, Result): API mode
// runs no container.
var ErrAPIMode = errors.New("an API-mode adapter runs no container")

// FallbackAPIMode is the fallback_reason of the llm_sessions row of an API-mode run: it has no
// session (no name, no native id, nothing to resume); the row carries its usage.
const FallbackAPIMode = "api_mode"

// FallbackAfterAPIMode is the fallback_reason of a CLI run that starts its session fresh after
// the mailbox's earlier runs were all in API mode, which keeps no session to continue.
const FallbackAfterAPIMode = "after_api_mode"

// runAPI is Run for an APIAgent: no container, no run directory, no container record. It
// calls RunAPI within the run's wall-clock limit and fills the outcome as collect does for a
// container: StatusSucceeded with the censored Result, StatusFailed with the adapter's error
// (its text censored), StatusTimedOut (ErrTimeout) when the limit ended it, StatusCanceled
// when ctx did. Stdout holds the censored, capped run log; Usage the provider's usage, also of
// a failed run. Errors: an attempt below 1, a worktree that is not an absolute path, or a
// phase that writes (API mode never runs one; config validation refuses such a binding).
func (e *Executor) runAPI(ctx context.Context, req RunRequest, agent APIAgent) (*RunOutcome, error) {
	in := req.Input
	switch {
	case req.Attempt < 1:
		return nil, fmt.Errorf("run: attempt must be ≥ 1, got %d", req.Attempt)
	case !in.Phase.ReadOnly():
		return nil, fmt.Errorf("run: phase %s writes the worktree; the API-mode adapter %s runs read-only phases only",
			in.Phase, agent.Name())
	case !filepath.IsAbs(req.Worktree):
		return nil, fmt.Errorf("run: worktree must be an absolute path, got %q", req.Worktree)
	}
	in.Attempt = req.Attempt
	if in.Key == "" {
		in.Key = phase.KeyOf(in.Phase, in.Step)
	}
	timeout := e.cfg.Timeout
	if req.Timeout > 0 {
		timeout = req.Timeout
	}
	out := &RunOutcome{Name: e.cc.InstanceName(req.Name()), Agent: agent.Name(), Started: time.Now()}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	rep, err := agent.RunAPI(rctx, APIRun{Input: in, Worktree: filepath.Clean(req.Worktree)})
	timedOut := errors.Is(rctx.Err(), context.DeadlineExceeded)
	cancel()
	out.Duration = time.Since(out.Started)
	out.Stdout, out.StdoutTruncated = tail(textwalk.Storable(e.cfg.Redact(rep.Log)), e.cfg.MaxOutputBytes)
	usage := rep.Usage
	out.Usage = &usage
	switch {
	case ctx.Err() != nil:
		out.Status, out.Err = StatusCanceled, ctx.Err()
		return out, fmt.Errorf("run %s canceled: %w", out.Name, out.Err)
	case timedOut:
		out.Status, out.Err = StatusTimedOut, fmt.Errorf("%w after %s", ErrTimeout, timeout)
	case err != nil:
		out.Status, out.Err = StatusFailed, &censoredError{msg: textwalk.Storable(e.cfg.Redact(err.Error())), err: err}
	case rep.Result == nil:
		out.Status, out.Err = StatusFailed, phase.ErrNoResult
	default:
		textwalk.Map(rep.Result, func(s string) string { return textwalk.Storable(e.cfg.Redact(s)) })
		out.Status, out.Result = StatusSucceeded, rep.Result
	}
	return out, nil
}

// censoredError is an error whose text passed the censor (and storable); errors.Is and
// errors.As still see the original.
type censoredError struct {
	msg string
	err error
}

func (c *censoredError) Error() string { return c.msg }
func (c *censoredError) Unwrap() error { return c.err }

// recordAPIMode writes the llm_sessions row of an API-mode run: no session name, no native id,
// fallback_reason api_mode, and the provider's usage (also of a failed run: its tokens were
// spent). The row is the run's share in the usage path every run feeds (status comment,
// pages, metrics, budget). nil when there is no session store or no outcome.
func (s *Service) recordAPIMode(ctx context.Context, job phase.Job, adapter string, agent APIAgent, out *RunOutcome) *phase.SessionRecord {
	if s.sessions.Store == nil || out == nil {
		return nil
	}
	rec := &phase.SessionRecord{MailboxID: job.MailboxID, Adapter: adapter, Model: agent.Model(job.Input),
		FallbackReason: FallbackAPIMode, DurationMS: out.Duration.Milliseconds(), Succeeded: out.Status == StatusSucceeded}
	if job.RunID != 0 {
		id := job.RunID
		rec.RunID = &id
	}
	if u := out.Usage; u != nil {
		rec.TokensIn, rec.TokensOut, rec.ReportedIn, rec.ReportedOut = u.InputTokens, u.OutputTokens, u.InputTokens, u.OutputTokens
		if u.Rated {
			rec.CostUSD, rec.ReportedCost = u.CostUSD, u.CostUSD
		}
	}
	if err := s.sessions.Store.RecordSession(context.WithoutCancel(ctx), rec); err != nil {
		s.log.Warn("API-mode usage not recorded", "mailbox_id", job.MailboxID, "err", err)
	}
	return rec
}

// sessionLister is the part of a SessionStore that lists a mailbox's session rows (the SQL
// store has it); plan uses it to say why a CLI run after API-mode runs starts fresh.
type sessionLister interface {
	Sessions(ctx context.Context, mailboxID int64) ([]phase.SessionRecord, error)
}

// firstSessionReason is the fallback reason of a CLI run with no completed session to resume:
// FallbackAfterAPIMode when the mailbox's earlier runs were in API mode, else
// FallbackNoPriorSession.
func (s *Service) firstSessionReason(ctx context.Context, mailboxID int64) string {
	l, ok := s.sessions.Store.(sessionLister)
	if !ok {
		return FallbackNoPriorSession
	}
	rows, err := l.Sessions(ctx, mailboxID)
	if err == nil && slices.ContainsFunc(rows, func(r phase.SessionRecord) bool { return r.FallbackReason == FallbackAPIMode }) {
		return FallbackAfterAPIMode
	}
	return FallbackNoPriorSession
}
