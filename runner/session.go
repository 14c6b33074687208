package runner

// Capabilities is what an adapter declares about its CLI's sessions (issue: one agent session
// per issue). Adapters whose CLI cannot resume declare ResumableSessions false, and Alfred then
// runs every phase fresh, with no session mount.
type Capabilities struct {
	// ResumableSessions is true when the CLI can continue a session by its exact id in
	// non-interactive mode.
	ResumableSessions bool `json:"resumable_sessions"`
	// SessionStatePath is the absolute directory inside the container that holds the CLI's
	// sessions and nothing else (no credentials, settings or hooks), e.g.
	// /alfred/home/.claude/projects/-workspace for Claude Code with its cwd at /workspace
	// (shared/reference/agent-clis.md, "Dir to persist for /workspace"). Alfred mounts the
	// mailbox's state directory there, read-write, for every phase.
	SessionStatePath string `json:"session_state_path,omitempty"`
	// CallerChosenID is true when the caller picks the session id of a new session (e.g.
	// Claude Code --session-id <uuid>); otherwise the id is read from the CLI's output.
	CallerChosenID bool `json:"caller_chosen_id,omitempty"`
	// CumulativeUsage is true when the CLI reports tokens and cost summed over the whole session
	// after a resume; Alfred then records the difference per run.
	CumulativeUsage bool `json:"cumulative_usage,omitempty"`
	// VersionCommand prints the CLI's version when run as the image's command (detection).
	VersionCommand []string `json:"version_command,omitempty"`
}

// SessionAgent is an Agent whose CLI has sessions. Adapters that implement it get the
// session fields of Input (SessionName, SessionID, Resume) filled by the Executor.
type SessionAgent interface {
	Agent
	// Capabilities declares the CLI's session support.
	Capabilities() Capabilities
	// ParseVersion extracts the version from the output of Capabilities().VersionCommand,
	// e.g. "2.1.332" from "2.1.332 (Claude Code)".
	ParseVersion(output string) (string, error)
	// ResumeVerified reports whether resume by id was verified for that CLI version; an
	// unverified version lowers ResumableSessions to false (fallback reason
	// unsupported_version).
	ResumeVerified(version string) bool
}

// Fallback reasons: why a run that could have resumed started a fresh session instead.
const (
	FallbackNoPriorSession     = "no_prior_session"    // first run of the mailbox with this adapter
	FallbackAdapterChanged     = "adapter_changed"     // the phase is bound to another adapter than the last run's
	FallbackStateMissing       = "state_missing"       // the session directory is gone or half-written
	FallbackUnsupportedVersion = "unsupported_version" // the CLI version is not verified to resume
	FallbackRefused            = "refused"             // the CLI refused the resume; re-invoked fresh in the same run
)
