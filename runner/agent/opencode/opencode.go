// Package opencode is the "opencode" agent adapter for the opencode CLI (npm opencode-ai).
//
// Facts about the CLI come from spec/agents.md §3 (opencode 1.18.33) and its "Adapter notes";
// each use below cites the subsection. What every CLI adapter shares is clikit.Agent; this
// package declares the CLI.
//
// The run is headless: `opencode run --format json --auto [-m provider/model]
// [--session <id> | --title NAME] <prompt>` (§3 Invocation). The prompt is one positional
// argument: stdin is closed, and a non-TTY stdin would be combined with the message (§3
// Invocation, spec/agents.md "General rules"). --auto approves permissions; without it `run`
// auto-rejects every "ask" (§3 Invocation). The session id (ses_…) is assigned by opencode and
// read from the events' sessionID; resume is `--session <id>` by exact id only, never
// --continue (§3 Sessions). Sessions live in a SQLite database that OPENCODE_DB moves into
// SessionStatePath, away from auth.json in opencode's data dir (§3 Sessions "Persist"). The
// provider API key travels only in the environment (§3 Auth and version).
package opencode

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Name is the adapter name used in config.
const Name = "opencode"

// SessionStatePath is where the mailbox's session directory is mounted: a directory that holds
// only $OPENCODE_DB and its -wal/-shm files (§3 Sessions "Persist", Adapter notes 4). It is a
// direct child of HOME so that mounting it creates no root-owned directory on the way (opencode
// writes its own data dir ~/.local/share/opencode, which must stay writable and unpersisted).
const SessionStatePath = runner.HomeDir + "/.opencode-sessions"

// DBPath is the OPENCODE_DB value: the session database inside SessionStatePath.
const DBPath = SessionStatePath + "/opencode.db"

// SIGTERMExitCode is the CLI's exit code when stopped with SIGTERM (§3 Failure detection).
const SIGTERMExitCode = 143

// ResumeMissExitCode is opencode's exit code for an unknown --session, with nothing on stdout
// and stderr "Error: Session not found" in ANSI colours (§3 Failure detection).
const ResumeMissExitCode = 1

const resumeMissText = "Session not found"

// DefaultAPIKeyEnv is the provider key variable used when Config.APIKeyEnv is empty.
const DefaultAPIKeyEnv = "ANTHROPIC_API_KEY"

// VerifiedVersions is the conservative set of versions on which resume by id is verified: the
// 1.18 line from the tested 1.18.33 (§3 [obs 1.18.33]; storage moved to SQLite in 1.2.0, so
// older lines differ).
var VerifiedVersions = clikit.Versions{MinPatch: map[string]int{"1.18": 33}}

// Config configures the adapter: Image (the opencode binary on PATH, warmed: its first run
// installs npm packages, §3 Invocation), APIKey (the provider key, passed as APIKeyEnv; env
// only), and optionally Binary ("opencode"), Model (-m "provider/model"), APIKeyEnv
// (DefaultAPIKeyEnv if empty; e.g. OPENAI_API_KEY, GEMINI_API_KEY, §3 Auth and version),
// ConfigContent (OPENCODE_CONFIG_CONTENT: inline opencode.json, e.g. a provider baseURL or the
// agent's steps limit, §3 Failure detection; env only) and VerifiedVersions.
type Config = clikit.Config

// cli declares opencode for the shared adapter base. With Resume it passes `--session <id>`
// (an id starting with "ses_"); otherwise a SessionName becomes --title (a readable title only:
// opencode cannot resume by title, §3 Sessions). A SessionID without Resume is ignored:
// opencode assigns ids. Usage is per run: step_finish events count this run's steps (not
// observed after a resume; no cumulative report is recorded for opencode).
var cli = &clikit.CLI{
	Name:      Name,
	Binary:    "opencode",
	Args:      []string{"run", "--format", "json", "--auto"},
	ModelFlag: "-m",
	Sessions: clikit.Sessions{NameFlag: "--title", ResumeFlag: "--session",
		ValidID: func(id string) bool { return strings.HasPrefix(id, "ses_") }, IDKind: "a ses_… session id"},
	Env:              env,
	Egress:           egressHosts,
	SessionStatePath: SessionStatePath,
	Verified:         VerifiedVersions,
	// Without stderr, a refusal is inferred from its shape: exit 1 and no event at all (§3
	// Failure detection; the stderr line is in ANSI colours, stripped).
	ResumeMiss: clikit.ResumeMiss{Text: resumeMissText, ExitCode: ResumeMissExitCode,
		Inferred: "exit 1 with no event (inferred; stderr not available)"},
	Read: read,
}

// egressHosts are the hosts a run reaches without a base URL: the provider of the key's
// variable (Anthropic, OpenAI; another provider's host is the operator's runner.egress.allow)
// and models.dev, where opencode reads its model list at start-up (spec/agents.md, §3).
func egressHosts(cfg Config) []string {
	hosts := []string{"models.dev:443"}
	switch cmp.Or(cfg.APIKeyEnv, DefaultAPIKeyEnv) {
	case "ANTHROPIC_API_KEY":
		hosts = append(hosts, "api.anthropic.com:443")
	case "OPENAI_API_KEY":
		hosts = append(hosts, "api.openai.com:443")
	}
	return hosts
}

// env is the run's environment. OPENCODE_DB is set whenever the run has a session (SessionName
// or Resume, i.e. the Executor mounts SessionStatePath), so even a first run writes its session
// where it will persist; without a session it is left unset, since opencode does not create
// OPENCODE_DB's directory (exit 1 "unable to open database file" [obs 1.18.33,
// runner/agent/realcli]).
func env(cfg Config, in phase.Input) []string {
	var env []string
	if in.SessionName != "" || in.Resume {
		env = append(env, "OPENCODE_DB="+DBPath)
	}
	env = append(env, "OPENCODE_DISABLE_AUTOUPDATE=true", cmp.Or(cfg.APIKeyEnv, DefaultAPIKeyEnv)+"="+cfg.APIKey)
	if cfg.ConfigContent != "" {
		env = append(env, "OPENCODE_CONFIG_CONTENT="+cfg.ConfigContent)
	}
	return env
}

// Agent is the opencode adapter (clikit.Agent over cli); it implements runner.SessionAgent.
type Agent = clikit.Agent

// New returns the adapter. Errors: no image, or no API key.
func New(cfg Config) (*Agent, error) { return clikit.New(cli, cfg) }

// read reads the JSON events (§3 Output, Failure detection): the run failed with exit ≠ 0, an
// error event, or no event with a sessionID. Usage is the sum over this run's step_finish
// events: input tokens (input plus cache reads and writes), output tokens (output plus
// reasoning) and cost (USD); the final text is the text of the last step.
func read(_ phase.Input, exit runner.ExitState, stdout, _ []byte, _ string) clikit.Reading {
	s := ParseStream(stdout)
	r := clikit.Reading{Started: s.Events > 0, SessionID: s.SessionID, OtherSessionID: s.OtherSessionID,
		FinalText: s.FinalText, InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, CostUSD: s.CostUSD}
	if exit.Code != 0 || len(s.Errors) > 0 || s.SessionID == "" {
		r.Failure = fmt.Errorf("opencode: run failed (exit code %d, session %q): %s", exit.Code, s.SessionID, strings.Join(s.Errors, "; "))
	}
	return r
}
