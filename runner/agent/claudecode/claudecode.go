// Package claudecode is the "claude-code" agent adapter for Anthropic's Claude Code CLI.
//
// Facts about the CLI come from spec/agents.md, section 1 (Claude Code
// 2.1.332) and its "Adapter notes"; each use below cites the subsection.
//
// The run is headless: `claude -p <prompt> --output-format stream-json --verbose
// --permission-mode bypassPermissions [--model M] [--max-turns N] [--session-id ID [-n NAME] |
// --resume ID]` (§1 Invocation, §1 Sessions). The prompt is not secret and travels as the -p
// argument, never on stdin (the container's stdin is closed, spec/agents.md "General rules"); the
// API key travels only in the environment (ANTHROPIC_API_KEY, §1 Auth and version). The
// container user is not root, so bypassPermissions needs no IS_SANDBOX (§1 Invocation, root
// trap). The agent writes its result to /alfred/out/result.json; the stream on stdout gives the
// session id, usage and cost.
package claudecode

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Name is the adapter name used in config.
const Name = "claude-code"

// MaxPromptBytes bounds the -p argument. Linux refuses a single argv string over 128 KiB
// (MAX_ARG_STRLEN); above this size the prompt leaves the long fields (description, CI log,
// comments) in /alfred/in/input.json and tells the agent to read them there.
const MaxPromptBytes = clikit.MaxPromptBytes

// SessionStatePath is where the mailbox's session directory is mounted: the transcripts of the
// project dir of cwd /workspace, ~/.claude/projects/-workspace with HOME=/alfred/home (§1
// Sessions: persisting only this dir is enough; never the credentials or settings beside it).
const SessionStatePath = runner.HomeDir + "/.claude/projects/-workspace"

// SIGTERMExitCode is the CLI's exit code when stopped with SIGTERM (§1 Failure detection).
const SIGTERMExitCode = 143

// VerifiedVersions is the conservative set of versions on which resume by exact id is verified:
// the 2.1 line from the tested 2.1.332 on (§1 Sessions [obs 2.1.332]; earlier 2.1 builds had
// cwd/worktree resume fixes, CHANGELOG 2.1.94, 2.1.136, 2.1.224). Config.VerifiedVersions adds
// exact versions an operator has checked.
var VerifiedVersions = clikit.Versions{MinPatch: map[string]int{"2.1": 332}}

// Config configures the adapter.
type Config struct {
	// Image has the claude binary (npm @anthropic-ai/claude-code) on PATH and runs as non-root.
	Image string `json:"image" yaml:"image"`
	// Binary is the CLI executable ("claude" if empty).
	Binary string `json:"binary,omitempty" yaml:"binary"`
	// Model is the default --model (alias such as "sonnet" or a full id) when Input.Model is
	// empty; "" leaves the CLI's default (§1 Invocation).
	Model string `json:"model,omitempty" yaml:"model"`
	// MaxTurns adds --max-turns N when > 0; hitting it fails the run with subtype
	// error_max_turns (§1 Failure detection; the flag works although --help omits it).
	MaxTurns int `json:"max_turns,omitempty" yaml:"max_turns"`
	// APIKey is passed as ANTHROPIC_API_KEY (§1 Auth and version). Secret: env only.
	APIKey string `json:"-" yaml:"-"`
	// BaseURL, when set, is passed as ANTHROPIC_BASE_URL (§1 Auth and version) — e.g. a proxy.
	BaseURL string `json:"base_url,omitempty" yaml:"base_url"`
	// VerifiedVersions lists further CLI versions (exact, "2.1.400") on which resume by id was
	// checked by the operator; see VerifiedVersions.
	VerifiedVersions []string `json:"verified_versions,omitempty" yaml:"verified_versions"`
}

// Agent is the Claude Code adapter; it implements runner.SessionAgent.
type Agent struct {
	cfg Config
}

var _ runner.SessionAgent = (*Agent)(nil)

// New returns the adapter. Errors: no image, or no API key.
func New(cfg Config) (*Agent, error) {
	if cfg.Image == "" {
		return nil, errors.New("claude-code: image is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("claude-code: API key is required")
	}
	if cfg.Binary == "" {
		cfg.Binary = "claude"
	}
	return &Agent{cfg: cfg}, nil
}

// Name returns "claude-code".
func (a *Agent) Name() string { return Name }

// Capabilities declares resumable sessions with caller-chosen UUIDs (§1 Sessions), stored under
// SessionStatePath, and cumulative usage after a resume (§1 Output "Cost after resume"; Result
// reports tokens from modelUsage so that tokens and cost are both session totals).
func (a *Agent) Capabilities() runner.Capabilities {
	return runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  SessionStatePath,
		CallerChosenID:    true,
		CumulativeUsage:   true,
		VersionCommand:    []string{a.cfg.Binary, "--version"},
	}
}

// ParseVersion extracts "2.1.332" from `claude --version` output "2.1.332 (Claude Code)"
// (§1 Auth and version).
func (a *Agent) ParseVersion(output string) (string, error) { return clikit.ParseVersion(Name, output) }

// ResumeVerified reports whether version is in VerifiedVersions or Config.VerifiedVersions.
func (a *Agent) ResumeVerified(version string) bool {
	return VerifiedVersions.VerifiedWith(version, a.cfg.VerifiedVersions)
}

// Command compiles the headless invocation (see the package doc). A SessionID in the input
// adds --session-id (new session, plus -n SessionName when set: §1 Sessions, -n works with -p)
// or, with Resume, --resume (§1 Sessions: --session-id a second time fails with "already in
// use"). It never emits -c/--continue, which silently starts a new session when nothing matches
// (Adapter notes 2). The session id must be a UUID. No secret is in Cmd.
func (a *Agent) Command(in phase.Input) (runner.Invocation, error) {
	prompt, err := Prompt(in)
	if err != nil {
		return runner.Invocation{}, err
	}
	cmd := []string{a.cfg.Binary, "-p", prompt,
		"--output-format", "stream-json", "--verbose", // stream-json needs --verbose (§1 Invocation)
		"--permission-mode", "bypassPermissions"}
	if model := clikit.Model(in, a.cfg.Model); model != "" {
		cmd = append(cmd, "--model", model)
	}
	if a.cfg.MaxTurns > 0 {
		cmd = append(cmd, "--max-turns", strconv.Itoa(a.cfg.MaxTurns))
	}
	if in.SessionID != "" {
		if !clikit.IsUUID(in.SessionID) {
			return runner.Invocation{}, fmt.Errorf("claude-code: session id %q is not a UUID", in.SessionID)
		}
		if in.Resume {
			cmd = append(cmd, "--resume", in.SessionID)
		} else {
			cmd = append(cmd, "--session-id", in.SessionID)
			if in.SessionName != "" {
				cmd = append(cmd, "-n", in.SessionName)
			}
		}
	}
	env := []string{"ANTHROPIC_API_KEY=" + a.cfg.APIKey}
	if a.cfg.BaseURL != "" {
		env = append(env, "ANTHROPIC_BASE_URL="+a.cfg.BaseURL)
	}
	return runner.Invocation{Image: a.cfg.Image, Cmd: cmd, Env: env}, nil
}

// Result is ResultStderr without stderr: Claude Code also reports a resume miss in the stream
// (§1 Failure detection), so nothing is lost.
func (a *Agent) Result(in phase.Input, exit runner.ExitState, stdout []byte, outDir string) (*phase.Result, error) {
	return a.ResultStderr(in, exit, stdout, nil, outDir)
}

// ResultStderr reads the run's outcome. Order of checks:
//
//  1. a resume that found no session (stream result.errors or stderr contain "No conversation
//     found with session ID", §1 Failure detection) → *SessionNotFoundError (errors.Is
//     runner.ErrSessionNotFound);
//  2. killed by Alfred → error;
//  3. no final result event, exit ≠ 0 or result.is_error → error with subtype and errors
//     (§1 Failure detection: "exit≠0 or result.is_error means failure");
//  4. a run with a chosen or resumed id whose stream reports another session id → error
//     (*clikit.MismatchError, Adapter notes 2);
//  5. /alfred/out/result.json (validated); if it is missing but the final result text is a
//     JSON object satisfying the contract, that is accepted; otherwise runner.ErrNoResult.
//
// The Result gets SessionID, token counts and total_cost_usd from the stream. Tokens are the sum
// over modelUsage (input includes cache reads and writes) when the stream has per-model counts,
// else result.usage. After a resume total_cost_usd and modelUsage are cumulative for the session
// (§1 Output, Adapter notes 6); result.usage is not, which is why modelUsage is preferred: then
// all three are session totals, as Capabilities().CumulativeUsage says, and callers take the
// difference with runner.UsageDelta.
func (a *Agent) ResultStderr(in phase.Input, exit runner.ExitState, stdout, stderr []byte, outDir string) (*phase.Result, error) {
	s := ParseStream(stdout)
	if s.ResumeFailed() {
		return nil, &SessionNotFoundError{Agent: Name, SessionID: in.SessionID, Signal: resumeMissText}
	}
	if in.Resume {
		if l := clikit.StderrLine(stderr, resumeMissText); l != "" {
			return nil, &SessionNotFoundError{Agent: Name, SessionID: in.SessionID, Signal: l}
		}
	}
	if exit.Killed {
		return nil, fmt.Errorf("claude-code: killed (exit code %d)", exit.Code)
	}
	if s.Final == nil {
		return nil, fmt.Errorf("claude-code: no result event in the output (exit code %d)", exit.Code)
	}
	if exit.Code != 0 || s.Final.IsError {
		return nil, fmt.Errorf("claude-code: run failed (exit code %d, subtype %s, is_error %t): %s",
			exit.Code, s.Final.Subtype, s.Final.IsError, strings.Join(s.Final.Errors, "; "))
	}
	if in.SessionID != "" && s.SessionID != in.SessionID {
		return nil, &clikit.MismatchError{Agent: Name, Requested: in.SessionID, Got: s.SessionID}
	}
	r, err := clikit.ReadResult(in, outDir, s.Final.Result)
	if err != nil {
		return nil, err
	}
	r.SessionID = s.SessionID
	r.InputTokens, r.OutputTokens = s.Final.Tokens()
	r.CostUSD = s.Final.TotalCostUSD
	return r, nil
}

// SessionNotFoundError is returned by Result when `--resume <id>` found no session
// (§1 Failure detection). It matches runner.ErrSessionNotFound with errors.Is.
type SessionNotFoundError = clikit.SessionNotFoundError

// Prompt renders the prompt of a run (shared by every adapter): the issue, decisions, analysis,
// plan, CI log and comments as present, the phase's task, and the result contract. Over
// MaxPromptBytes it renders a brief variant pointing to /alfred/in/input.json.
func Prompt(in phase.Input) (string, error) { return clikit.Prompt(Name, in) }

// Keys lists the run keys the adapter has instructions for, sorted.
func Keys() []string { return clikit.Keys() }
