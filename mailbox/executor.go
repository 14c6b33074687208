package mailbox

import (
	"context"

	"github.com/alfred-bot/alfred/runner/phase"
)

// Executor runs one phase of a mailbox in a disposable container; runner.Service implements it.
// The machine only decides which phase runs, with which input.
type Executor interface {
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
