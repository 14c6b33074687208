// Package claudecode is the "claude-code" agent adapter for Anthropic's Claude Code CLI.
//
// Facts about the CLI come from spec/agents.md §1 (Claude Code 2.1.332) and its "Adapter
// notes"; each use below cites the subsection. What every CLI adapter shares (configuration,
// capabilities, the order of result checks) is clikit.Agent; this package declares the CLI.
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

// Config configures the adapter: Image (the claude binary, npm @anthropic-ai/claude-code, on
// PATH), APIKey (passed as ANTHROPIC_API_KEY, §1 Auth and version; env only), and optionally
// Binary ("claude"), Model (--model alias or full id, §1 Invocation), MaxTurns (--max-turns N:
// hitting it fails the run with subtype error_max_turns, §1 Failure detection), BaseURL
// (ANTHROPIC_BASE_URL, e.g. a proxy) and VerifiedVersions (see VerifiedVersions).
type Config = clikit.Config

// cli declares Claude Code for the shared adapter base. The session id of a new session is
// chosen by Alfred: --session-id (plus -n SessionName, which works with -p) on the first run,
// --resume after (§1 Sessions: --session-id a second time fails with "already in use"); never
// -c/--continue, which silently starts a new session when nothing matches (Adapter notes 2).
// Usage is cumulative after a resume (§1 Output "Cost after resume"; tokens are read from
// modelUsage so that tokens and cost are both session totals).
var cli = &clikit.CLI{
	Name:   Name,
	Binary: "claude",
	Args: []string{"-p", clikit.PromptArg,
		"--output-format", "stream-json", "--verbose", // stream-json needs --verbose (§1 Invocation)
		"--permission-mode", "bypassPermissions"},
	ModelFlag: "--model",
	Extra: func(cfg Config, _ phase.Input) []string {
		if cfg.MaxTurns > 0 {
			return []string{"--max-turns", strconv.Itoa(cfg.MaxTurns)}
		}
		return nil
	},
	Sessions: clikit.Sessions{NewFlag: "--session-id", NameFlag: "-n", ResumeFlag: "--resume",
		ValidID: clikit.IsUUID, IDKind: "a UUID"},
	KeyEnv:           "ANTHROPIC_API_KEY",
	BaseURLEnv:       "ANTHROPIC_BASE_URL",
	Egress:           func(Config) []string { return []string{"api.anthropic.com:443"} },
	SessionStatePath: SessionStatePath,
	CallerChosenID:   true,
	CumulativeUsage:  true,
	Verified:         VerifiedVersions,
	ResumeMiss:       clikit.ResumeMiss{Text: resumeMissText},
	Read:             read,
}

// Agent is the Claude Code adapter (clikit.Agent over cli); it implements runner.SessionAgent.
type Agent = clikit.Agent

// New returns the adapter. Errors: no image, or no API key.
func New(cfg Config) (*Agent, error) { return clikit.New(cli, cfg) }

// read reads the stream (§1 Output, Failure detection): a resume miss is reported in the final
// result's errors as well as on stderr; the run failed without a final result event, with
// exit ≠ 0 or with result.is_error. Tokens are the sum over modelUsage (input includes cache
// reads and writes) when the stream has per-model counts, else result.usage; cost is
// total_cost_usd.
func read(_ phase.Input, exit runner.ExitState, stdout, _ []byte, _ string) clikit.Reading {
	s := ParseStream(stdout)
	r := clikit.Reading{Started: s.Events > 0, ResumeRefused: s.ResumeFailed(), SessionID: s.SessionID}
	switch {
	case s.Final == nil:
		r.Failure = fmt.Errorf("claude-code: no result event in the output (exit code %d)", exit.Code)
	case exit.Code != 0 || s.Final.IsError:
		r.Failure = fmt.Errorf("claude-code: run failed (exit code %d, subtype %s, is_error %t): %s",
			exit.Code, s.Final.Subtype, s.Final.IsError, strings.Join(s.Final.Errors, "; "))
	default:
		r.FinalText = s.Final.Result
		r.InputTokens, r.OutputTokens = s.Final.Tokens()
		r.CostUSD = s.Final.TotalCostUSD
	}
	return r
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
