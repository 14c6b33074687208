// Package codex is the "codex" agent adapter for OpenAI's Codex CLI.
//
// Facts about the CLI come from spec/agents.md, section 2 (Codex CLI
// 0.171.0) and its "Adapter notes"; each use below cites the subsection.
//
// The run is headless: `codex exec --json --skip-git-repo-check
// --dangerously-bypass-approvals-and-sandbox [-m M] [-c provider config] [resume <id>] <prompt>`
// (§2 Invocation; exec-level flags go before `resume`, §2 Sessions). The container is the
// sandbox, so Codex's own sandbox and approvals are off (--full-auto no longer exists, §2
// Invocation). The prompt is an argument: stdin is closed, and piped stdin would be appended to
// the prompt (spec/agents.md "General rules"). The API key travels only in the environment as
// CODEX_API_KEY (§2 Auth and version). The session (thread) id is assigned by Codex and read from
// thread.started.thread_id; resume is by that exact UUID only, never --last or a thread name
// (both silently start a new thread, §2 Failure detection).
package codex

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Name is the adapter name used in config.
const Name = "codex"

// SessionStatePath is where the mailbox's session directory is mounted: $CODEX_HOME/sessions
// with CODEX_HOME defaulting to ~/.codex (§2 Sessions: persisting only sessions/ is enough; the
// sqlite files beside it are rebuilt; auth.json and config.toml must not be persisted).
const SessionStatePath = runner.HomeDir + "/.codex/sessions"

// SIGTERMExitCode is the CLI's exit code when stopped with SIGTERM (§2 Failure detection).
const SIGTERMExitCode = 143

// ResumeMissExitCode and resumeMissText are how Codex refuses `resume <unknown id>`: exit 1,
// nothing on stdout, stderr "… no rollout found for thread id <id> …" (§2 Failure detection).
const ResumeMissExitCode = 1

const resumeMissText = "no rollout found for thread id"

// VerifiedVersions is the conservative set of versions on which resume by id is verified: the
// tested 0.171.x line from 0.171.0 (§2 [obs 0.171.0]). Codex changes its exec flags across
// minor versions (--full-auto was removed around 0.146, §2 Invocation), so other lines are not
// trusted until checked.
var VerifiedVersions = clikit.Versions{MinPatch: map[string]int{"0.171": 0}}

// Config configures the adapter.
type Config struct {
	// Image has the codex binary (npm @openai/codex) on PATH and runs as non-root.
	Image string `json:"image" yaml:"image"`
	// Binary is the CLI executable ("codex" if empty).
	Binary string `json:"binary,omitempty" yaml:"binary"`
	// Model is the default -m when Input.Model is empty; "" leaves the CLI's default.
	Model string `json:"model,omitempty" yaml:"model"`
	// APIKey is passed as CODEX_API_KEY, honoured by `codex exec` (§2 Auth and version).
	// Secret: env only.
	APIKey string `json:"-" yaml:"-"`
	// BaseURL, when set, selects a custom Responses-API provider through -c overrides whose key
	// is read from CODEX_API_KEY (§2 Auth and version, "Custom endpoint"); the URL is not
	// secret.
	BaseURL string `json:"base_url,omitempty" yaml:"base_url"`
	// VerifiedVersions lists further CLI versions (exact) on which resume by id was checked.
	VerifiedVersions []string `json:"verified_versions,omitempty" yaml:"verified_versions"`
}

// Agent is the Codex adapter; it implements runner.SessionAgent.
type Agent struct {
	cfg Config
}

var _ runner.SessionAgent = (*Agent)(nil)

// New returns the adapter. Errors: no image, or no API key.
func New(cfg Config) (*Agent, error) {
	if cfg.Image == "" {
		return nil, errors.New("codex: image is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("codex: API key is required")
	}
	if cfg.Binary == "" {
		cfg.Binary = "codex"
	}
	return &Agent{cfg: cfg}, nil
}

// Name returns "codex".
func (a *Agent) Name() string { return Name }

// Capabilities declares resumable sessions whose id Codex assigns (§2 Sessions), stored under
// SessionStatePath, with cumulative usage after a resume (§2 Output "Usage after resume" [obs]).
func (a *Agent) Capabilities() runner.Capabilities {
	return runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  SessionStatePath,
		CallerChosenID:    false,
		CumulativeUsage:   true,
		VersionCommand:    []string{a.cfg.Binary, "--version"},
	}
}

// ParseVersion extracts "0.171.0" from `codex --version` output "codex-cli 0.171.0" (§2 Auth
// and version).
func (a *Agent) ParseVersion(output string) (string, error) { return clikit.ParseVersion(Name, output) }

// ResumeVerified reports whether version is in VerifiedVersions or Config.VerifiedVersions.
func (a *Agent) ResumeVerified(version string) bool {
	return VerifiedVersions.VerifiedWith(version, a.cfg.VerifiedVersions)
}

// Command compiles the headless invocation (see the package doc). With Resume, `resume <id>`
// follows the exec flags (§2 Sessions); the id must be a UUID, because an unknown thread name
// would silently start a new thread (Adapter notes 2). A SessionID without Resume is ignored:
// Codex cannot create a session with a chosen id. No secret is in Cmd.
func (a *Agent) Command(in phase.Input) (runner.Invocation, error) {
	prompt, err := clikit.Prompt(Name, in)
	if err != nil {
		return runner.Invocation{}, err
	}
	cmd := []string{a.cfg.Binary, "exec", "--json", "--skip-git-repo-check",
		"--dangerously-bypass-approvals-and-sandbox"}
	if model := clikit.Model(in, a.cfg.Model); model != "" {
		cmd = append(cmd, "-m", model)
	}
	if a.cfg.BaseURL != "" {
		cmd = append(cmd, "-c", "model_provider=alfred", "-c",
			fmt.Sprintf(`model_providers.alfred={name="alfred",base_url=%q,env_key="CODEX_API_KEY",wire_api="responses"}`, a.cfg.BaseURL))
	}
	if in.Resume {
		if !clikit.IsUUID(in.SessionID) {
			return runner.Invocation{}, fmt.Errorf("codex: resume needs a thread UUID, got %q", in.SessionID)
		}
		cmd = append(cmd, "resume", in.SessionID)
	}
	cmd = append(cmd, prompt)
	return runner.Invocation{Image: a.cfg.Image, Cmd: cmd, Env: []string{"CODEX_API_KEY=" + a.cfg.APIKey}}, nil
}

// Result is ResultStderr without stderr. A resume refusal is then inferred from its shape:
// Resume, exit code ResumeMissExitCode and no thread.started event on stdout (§2 Failure
// detection: nothing on stdout).
func (a *Agent) Result(in phase.Input, exit runner.ExitState, stdout []byte, outDir string) (*phase.Result, error) {
	return a.ResultStderr(in, exit, stdout, nil, outDir)
}

// ResultStderr reads the run's outcome. Order of checks:
//
//  1. a resume refused (stderr contains "no rollout found for thread id", or, without stderr,
//     exit 1 with no thread.started) → *clikit.SessionNotFoundError (errors.Is
//     runner.ErrSessionNotFound);
//  2. killed by Alfred → error;
//  3. exit ≠ 0, a turn.failed event, or no thread.started → error (§2 Failure detection: every
//     failure exits 1);
//  4. a resumed run whose thread.started.thread_id is not the requested id → error (the silent
//     new thread, *clikit.MismatchError);
//  5. /alfred/out/result.json, or the last agent_message as a JSON object (§2 Output "Final
//     text"); otherwise runner.ErrNoResult.
//
// The Result gets SessionID = thread_id and the last turn.completed usage: input_tokens
// (cached input is a part of it) and output_tokens. These are thread totals after a resume
// (§2 Output [obs]); Codex reports no cost (CostUSD stays 0).
func (a *Agent) ResultStderr(in phase.Input, exit runner.ExitState, stdout, stderr []byte, outDir string) (*phase.Result, error) {
	s := ParseStream(stdout)
	if in.Resume {
		if l := clikit.StderrLine(stderr, resumeMissText); l != "" {
			return nil, &clikit.SessionNotFoundError{Agent: Name, SessionID: in.SessionID, Signal: l}
		}
		if stderr == nil && exit.Code == ResumeMissExitCode && !exit.Killed && s.ThreadID == "" {
			return nil, &clikit.SessionNotFoundError{Agent: Name, SessionID: in.SessionID,
				Signal: "exit 1 before thread.started (inferred; stderr not available)"}
		}
	}
	if exit.Killed {
		return nil, fmt.Errorf("codex: killed (exit code %d)", exit.Code)
	}
	if exit.Code != 0 || s.Failed != "" || s.ThreadID == "" {
		msg := s.Failed
		if msg == "" {
			msg = strings.Join(s.Errors, "; ")
		}
		return nil, fmt.Errorf("codex: run failed (exit code %d, thread %q): %s", exit.Code, s.ThreadID, msg)
	}
	if in.Resume && s.ThreadID != in.SessionID {
		return nil, &clikit.MismatchError{Agent: Name, Requested: in.SessionID, Got: s.ThreadID}
	}
	r, err := clikit.ReadResult(in, outDir, s.FinalText)
	if err != nil {
		return nil, err
	}
	r.SessionID = s.ThreadID
	if s.Usage != nil {
		r.InputTokens, r.OutputTokens = s.Usage.InputTokens, s.Usage.OutputTokens
	}
	return r, nil
}
