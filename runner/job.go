package runner

import "github.com/alfred-bot/alfred/webhook/forge"

// Job is one run for a mailbox, as the mailbox machine asks for it.
type Job struct {
	MailboxID int64
	RunID     int64
	Attempt   int
	// ForgeName is the configured forge; the git credentials are looked up by it.
	ForgeName string
	// Repository gives the clone URL and the default branch (the merge request's target).
	Repository forge.Repository
	// Branch is the mailbox's branch, created from the default branch when it does not exist.
	Branch string
	Input  Input
	// Push commits what the agent changed and pushes Branch (read-write phases).
	Push bool
	// CommitMessage is used when the agent's result gives none.
	CommitMessage string
	// SessionName is the mailbox's session name (its branch, frozen at the first run) when the
	// run should continue the mailbox's agent session; "" runs without sessions (setting off,
	// or a merge-request mailbox).
	SessionName string
}

// JobOutcome is how a Job ended.
type JobOutcome struct {
	// Result is the agent's validated result, nil when the run failed.
	Result *Result
	// Failure says why the run failed, in words fit for a comment; "" on success.
	Failure string
	// Interrupted is true when the job's context was cancelled (lease lost, mailbox
	// cancelled, shutdown) before the run ended.
	Interrupted bool
	ExitCode    int
	// Output is the container's redacted, size-capped output.
	Output    string
	Container string
	// HeadSHA is the commit pushed (Push only); "" when the agent changed nothing.
	HeadSHA string
	// Session is the session record of the run, nil when the run used no session.
	Session *SessionRecord

	// Recovered is true when the outcome was collected by Service.Recover from a container
	// left running (or exited) by a process that stopped, rather than by Execute.
	Recovered bool
	// InterruptReason says, for an Interrupted outcome found by recovery, why the run could
	// not be collected (its container vanished, its worker stopped before the container
	// started, …); "" for a plain interruption.
	InterruptReason string
	// Resumable is the hook for the session work: true when the interrupted run's agent
	// session can be continued by the next run (the adapter resumes sessions and the mailbox
	// uses them); otherwise NotResumableReason says why not.
	Resumable          bool
	NotResumableReason string
}
