package runner

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/alfred-bot/alfred/runner/phase"
)

// Capabilities is what an adapter declares about its CLI's sessions (Alfred keeps one agent
// session per issue). Adapters whose CLI cannot resume declare ResumableSessions false, and Alfred then
// runs every phase fresh, with no session mount.
type Capabilities struct {
	// ResumableSessions is true when the CLI can continue a session by its exact id in
	// non-interactive mode.
	ResumableSessions bool `json:"resumable_sessions"`
	// SessionStatePath is the absolute directory inside the container that holds the CLI's
	// sessions and nothing else (no credentials, settings or hooks), e.g.
	// /alfred/home/.claude/projects/-workspace for Claude Code with its cwd at /workspace
	// (spec/agents.md, "Dir to persist for /workspace"). Alfred mounts the
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

// StderrResulter is implemented by adapters whose CLI reports some failures only on stderr
// (Codex, opencode, Copilot and Gemini say "cannot resume" there, spec/agents.md "Resume-miss
// signal"). The Executor then calls ResultStderr instead of Agent.Result.
type StderrResulter interface {
	ResultStderr(in phase.Input, exit ExitState, stdout, stderr []byte, outDir string) (*phase.Result, error)
}

// agentResult asks the adapter for the run's result, with stderr when it takes it.
func agentResult(a Agent, in phase.Input, exit ExitState, stdout, stderr []byte, outDir string) (*phase.Result, error) {
	if sr, ok := a.(StderrResulter); ok {
		return sr.ResultStderr(in, exit, stdout, stderr, outDir)
	}
	return a.Result(in, exit, stdout, outDir)
}

// ConfigRoot splits a session state path under HomeDir into the CLI's top configuration
// directory (e.g. /alfred/home/.claude) and the path below it (projects/-workspace). ok is
// false when the path is not at least two levels below HomeDir.
func ConfigRoot(statePath string) (root, rel string, ok bool) {
	r, err := filepath.Rel(HomeDir, statePath)
	if err != nil || r == "." || strings.HasPrefix(r, "..") {
		return "", "", false
	}
	first, rest, found := strings.Cut(r, "/")
	if !found {
		return "", "", false
	}
	return filepath.Join(HomeDir, first), rest, true
}

// Fallback reasons: why a run that could have resumed started a fresh session instead.
const (
	FallbackNoPriorSession     = "no_prior_session"    // first run of the mailbox with this adapter
	FallbackAdapterChanged     = "adapter_changed"     // the phase is bound to another adapter than the last run's
	FallbackStateMissing       = "state_missing"       // the session directory is gone or half-written
	FallbackStateElsewhere     = "state_elsewhere"     // the previous run's replica keeps the state in another data directory
	FallbackUnsupportedVersion = "unsupported_version" // the CLI version is not verified to resume
	FallbackRefused            = "refused"             // the CLI refused the resume; re-invoked fresh in the same run
)

// SessionStore keeps llm_sessions and agent_installations; internal/store/postgres implements it.
type SessionStore interface {
	// LatestSession returns the mailbox's most recent successful session record of any
	// adapter, nil when there is none.
	LatestSession(ctx context.Context, mailboxID int64) (*phase.SessionRecord, error)
	// RecordSession inserts r and sets r.ID.
	RecordSession(ctx context.Context, r *phase.SessionRecord) error
	// Installation returns the recorded CLI version of adapter in image, nil when unknown.
	Installation(ctx context.Context, adapter, image string) (*Installation, error)
	// RecordInstallation stores (or replaces) a detected version.
	RecordInstallation(ctx context.Context, in Installation) error
}

// Installation is one row of agent_installations: a CLI version detected in an image.
type Installation struct {
	Adapter        string `db:"adapter"`
	Image          string `db:"image"`
	Version        string `db:"version"`
	ResumeVerified bool   `db:"resume_verified"`
}
