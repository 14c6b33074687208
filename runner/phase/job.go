package phase

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
	// Rerun is true when the store found the same decision already run (mailbox.Run.Rerun): the
	// metrics count it (alfred_phase_reruns_total); the run goes on as any other.
	Rerun bool
}

// Outcome is how a Job ended.
type Outcome struct {
	// Result is the agent's validated result, nil when the run failed.
	Result *Result
	// Failure says why the run failed, in words fit for a comment; "" on success.
	Failure string
	// Interrupted is true when the job's context was cancelled (lease lost, mailbox
	// cancelled, shutdown) before the run ended.
	Interrupted bool
	// Detached is true (with Interrupted) when the context was cancelled with cause
	// ErrDetach: the container was left running with its worktree, to be found again
	// (reattached) by the next process's recovery.
	Detached bool
	ExitCode int
	// Output is the container's redacted, size-capped output.
	Output    string
	Container string
	// HeadSHA is the commit pushed (Push only); "" when the agent changed nothing.
	HeadSHA string
	// Session is the session record of the run, nil when the run used no session.
	Session *SessionRecord
	// Adapter is the configured agent whose container the run started (the phase's binding,
	// as in SessionRecord.Adapter); "" when no agent ran (a step without one, or a run that
	// ended before its container started). With Session nil, the run's tokens and cost are
	// its Result's.
	Adapter string

	// Recovered is true when the outcome was collected by Service.Recover from a container
	// left running (or exited) by a process that stopped, rather than by Execute.
	Recovered bool
	// InterruptReason says, for an Interrupted outcome found by recovery, why the run could
	// not be collected (its container vanished, its worker stopped before the container
	// started, …); "" for a plain interruption.
	InterruptReason string
	// Resumable says whether the interrupted run can be continued: true when its agent
	// session can be continued by the next run (the adapter resumes sessions and the mailbox
	// uses them); otherwise NotResumableReason says why not.
	Resumable          bool
	NotResumableReason string
	// HostileOutput lists what Alfred refused or bounded of what the run left, by reason
	// (internal/base/runfile: "link", "not_regular", "too_large", "deadline", "log_flood",
	// "nested_repository"); empty for a well-behaved run. A refused file fails the run (Failure
	// says which and why).
	HostileOutput []string
}

// SessionRecord is one row of llm_sessions: the session a run used.
type SessionRecord struct {
	ID        int64  `db:"id"`
	MailboxID int64  `db:"mailbox_id"`
	RunID     *int64 `db:"run_id"`
	Adapter   string `db:"adapter"`
	Model     string `db:"model"`
	// Name is the mailbox's session name (its branch); NativeID the CLI's own session id,
	// taken from the CLI's output stream — never from a file the container can write.
	Name           string `db:"session_name"`
	NativeID       string `db:"native_id"`
	Resumed        bool   `db:"resumed"`
	FallbackReason string `db:"fallback_reason"`
	// TokensIn, TokensOut and CostUSD are this run's share; Reported* what the CLI reported
	// (cumulative over the session on some CLIs, see Capabilities.CumulativeUsage).
	TokensIn     int64   `db:"tokens_in"`
	TokensOut    int64   `db:"tokens_out"`
	CostUSD      float64 `db:"cost_usd"`
	ReportedIn   int64   `db:"reported_in"`
	ReportedOut  int64   `db:"reported_out"`
	ReportedCost float64 `db:"reported_cost"`
	DurationMS   int64   `db:"duration_ms"`
	Succeeded    bool    `db:"succeeded"`
	// StateHost names where the run left the session state: the id of the data directory
	// of the replica that ran it (runner.StateHost; "" before it was recorded, and for API
	// mode, which keeps none).
	StateHost string `db:"state_host"`
}
