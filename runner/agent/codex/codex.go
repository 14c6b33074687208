// Package codex is the "codex" agent adapter for OpenAI's Codex CLI.
//
// Facts about the CLI come from spec/agents.md §2 (Codex CLI 0.171.0) and its "Adapter notes";
// each use below cites the subsection. What every CLI adapter shares is clikit.Agent; this
// package declares the CLI.
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

// Config configures the adapter: Image (the codex binary, npm @openai/codex, on PATH), APIKey
// (passed as CODEX_API_KEY, honoured by `codex exec`, §2 Auth and version; env only), and
// optionally Binary ("codex"), Model (-m), BaseURL (a custom Responses-API provider selected
// through -c overrides whose key is read from CODEX_API_KEY, §2 Auth and version "Custom
// endpoint"; the URL is not secret) and VerifiedVersions.
type Config = clikit.Config

// cli declares Codex for the shared adapter base. With Resume, `resume <id>` follows the exec
// flags (§2 Sessions); the id must be a UUID, because an unknown thread name would silently
// start a new thread (Adapter notes 2). A SessionID without Resume is ignored: Codex cannot
// create a session with a chosen id. Usage is cumulative after a resume (§2 Output "Usage after
// resume" [obs]).
var cli = &clikit.CLI{
	Name:   Name,
	Binary: "codex",
	Args: []string{"exec", "--json", "--skip-git-repo-check",
		"--dangerously-bypass-approvals-and-sandbox"},
	ModelFlag: "-m",
	Extra: func(cfg Config, _ phase.Input) []string {
		if cfg.BaseURL == "" {
			return nil
		}
		return []string{"-c", "model_provider=alfred", "-c",
			fmt.Sprintf(`model_providers.alfred={name="alfred",base_url=%q,env_key="CODEX_API_KEY",wire_api="responses"}`, cfg.BaseURL)}
	},
	Sessions:         clikit.Sessions{ResumeFlag: "resume", ValidID: clikit.IsUUID, IDKind: "a thread UUID"},
	KeyEnv:           "CODEX_API_KEY",
	Egress:           func(Config) []string { return []string{"api.openai.com:443"} },
	SessionStatePath: SessionStatePath,
	CumulativeUsage:  true,
	Verified:         VerifiedVersions,
	// Without stderr, a refusal is inferred from its shape: exit 1 and nothing on stdout (§2
	// Failure detection).
	ResumeMiss: clikit.ResumeMiss{Text: resumeMissText, ExitCode: ResumeMissExitCode,
		Inferred: "exit 1 before thread.started (inferred; stderr not available)"},
	Read: read,
}

// Agent is the Codex adapter (clikit.Agent over cli); it implements runner.SessionAgent.
type Agent = clikit.Agent

// New returns the adapter. Errors: no image, or no API key.
func New(cfg Config) (*Agent, error) { return clikit.New(cli, cfg) }

// read reads the JSONL stream (§2 Output, Failure detection): the run failed with exit ≠ 0
// (every failure exits 1), a turn.failed event, or no thread.started. The session is
// thread.started.thread_id; usage the last turn.completed input_tokens (cached input is a part
// of it) and output_tokens, thread totals after a resume; Codex reports no cost. The final text
// is the last agent_message.
func read(_ phase.Input, exit runner.ExitState, stdout, _ []byte, _ string) clikit.Reading {
	s := ParseStream(stdout)
	r := clikit.Reading{Started: s.ThreadID != "", SessionID: s.ThreadID, FinalText: s.FinalText}
	if exit.Code != 0 || s.Failed != "" || s.ThreadID == "" {
		msg := s.Failed
		if msg == "" {
			msg = strings.Join(s.Errors, "; ")
		}
		r.Failure = fmt.Errorf("codex: run failed (exit code %d, thread %q): %s", exit.Code, s.ThreadID, msg)
	}
	if s.Usage != nil {
		r.InputTokens, r.OutputTokens = s.Usage.InputTokens, s.Usage.OutputTokens
	}
	return r
}
