package mailbox

import (
	"context"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Executor runs one phase of a mailbox in a disposable container; the runner package
// implements it (runner.Service). The machine only decides which phase runs, with which input.
type Executor interface {
	// Execute prepares a worktree on job.Branch, runs the phase's agent in a container and,
	// when job.Push is set, commits what the agent changed with the bot identity and pushes the
	// branch. A run that fails (bad exit, no or invalid result, timeout) is reported in
	// JobOutcome.Failure with a nil error; the error is for infrastructure failures (Docker or
	// git unavailable), after which the mailbox retries later. The container and worktree are
	// removed before Execute returns, whatever happened.
	Execute(ctx context.Context, job Job) (*JobOutcome, error)
	// Cleanup removes every container and worktree left for a mailbox (after a crash, or when
	// the mailbox closes). It returns nil when there is nothing to remove.
	Cleanup(ctx context.Context, mailboxID int64) error
}

// Job is one run to execute.
type Job struct {
	MailboxID int64
	RunID     int64
	Attempt   int
	ForgeName string
	Forge     forge.Forge
	// Repository gives the clone URL and default branch (the merge request's target).
	Repository forge.Repository
	// Branch is the mailbox's branch, created from the default branch when it does not exist.
	Branch string
	Input  runner.Input
	// Push commits and pushes the worktree after the run (read-write phases).
	Push bool
	// CommitMessage is used when the agent's result gives none.
	CommitMessage string
}

// JobOutcome is how a run ended.
type JobOutcome struct {
	// Result is the agent's validated result, nil when the run failed.
	Result *runner.Result
	// Failure says why the run failed, in words for a comment; "" on success.
	Failure string
	// Interrupted is true when ctx was cancelled (lease lost, mailbox cancelled, shutdown).
	Interrupted bool
	ExitCode    int
	// Output is the container's redacted, size-capped output.
	Output    string
	Container string
	// HeadSHA is the commit pushed (Push only); "" when the agent changed nothing.
	HeadSHA string
}
