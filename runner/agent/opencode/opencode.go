// Package opencode is the "opencode" agent adapter for the opencode CLI (npm opencode-ai).
//
// Facts about the CLI come from spec/agents.md, section 3 (opencode
// 1.18.33) and its "Adapter notes"; each use below cites the subsection.
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
	"errors"
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

// Config configures the adapter.
type Config struct {
	// Image has the opencode binary on PATH (warmed: its first run installs npm packages, §3
	// Invocation) and runs as non-root.
	Image string `json:"image" yaml:"image"`
	// Binary is the CLI executable ("opencode" if empty).
	Binary string `json:"binary,omitempty" yaml:"binary"`
	// Model is the default -m, "provider/model", when Input.Model is empty; "" leaves the
	// configured default.
	Model string `json:"model,omitempty" yaml:"model"`
	// APIKeyEnv names the provider's key variable (DefaultAPIKeyEnv if empty; e.g.
	// OPENAI_API_KEY, GEMINI_API_KEY — §3 Auth and version).
	APIKeyEnv string `json:"api_key_env,omitempty" yaml:"api_key_env"`
	// APIKey is the provider key, passed as APIKeyEnv. Secret: env only.
	APIKey string `json:"-" yaml:"-"`
	// ConfigContent, when set, is passed as OPENCODE_CONFIG_CONTENT (inline opencode.json,
	// e.g. a provider baseURL or the agent's steps limit, §3 Failure detection). Env only,
	// since it may hold credentials.
	ConfigContent string `json:"-" yaml:"-"`
	// VerifiedVersions lists further CLI versions (exact) on which resume by id was checked.
	VerifiedVersions []string `json:"verified_versions,omitempty" yaml:"verified_versions"`
}

// Agent is the opencode adapter; it implements runner.SessionAgent.
type Agent struct {
	cfg Config
}

var _ runner.SessionAgent = (*Agent)(nil)

// New returns the adapter. Errors: no image, or no API key.
func New(cfg Config) (*Agent, error) {
	if cfg.Image == "" {
		return nil, errors.New("opencode: image is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("opencode: API key is required")
	}
	if cfg.Binary == "" {
		cfg.Binary = "opencode"
	}
	if cfg.APIKeyEnv == "" {
		cfg.APIKeyEnv = DefaultAPIKeyEnv
	}
	return &Agent{cfg: cfg}, nil
}

// Name returns "opencode".
func (a *Agent) Name() string { return Name }

// Capabilities declares resumable sessions whose id opencode assigns (§3 Sessions), stored in
// SessionStatePath. Usage is per run: step_finish events count this run's steps (not observed
// after a resume; the reference records no cumulative report for opencode).
func (a *Agent) Capabilities() runner.Capabilities {
	return runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  SessionStatePath,
		CallerChosenID:    false,
		CumulativeUsage:   false,
		VersionCommand:    []string{a.cfg.Binary, "--version"},
	}
}

// ParseVersion extracts "1.18.33" from `opencode --version` output "1.18.33" (§3 Auth and
// version).
func (a *Agent) ParseVersion(output string) (string, error) { return clikit.ParseVersion(Name, output) }

// ResumeVerified reports whether version is in VerifiedVersions or Config.VerifiedVersions.
func (a *Agent) ResumeVerified(version string) bool {
	return VerifiedVersions.VerifiedWith(version, a.cfg.VerifiedVersions)
}

// Command compiles the headless invocation (see the package doc). With Resume it adds
// `--session <id>` (an id starting with "ses_"); otherwise a SessionName becomes --title (a
// readable title only: opencode cannot resume by title, §3 Sessions). A SessionID without
// Resume is ignored: opencode assigns ids. OPENCODE_DB is set whenever the run has a session
// (SessionName or Resume, i.e. the Executor mounts SessionStatePath), so even a first run
// writes its session where it will persist; without a session it is left unset, since opencode
// cannot open a database in a directory that does not exist. No secret is in Cmd.
func (a *Agent) Command(in phase.Input) (runner.Invocation, error) {
	prompt, err := clikit.Prompt(Name, in)
	if err != nil {
		return runner.Invocation{}, err
	}
	cmd := []string{a.cfg.Binary, "run", "--format", "json", "--auto"}
	if model := clikit.Model(in, a.cfg.Model); model != "" {
		cmd = append(cmd, "-m", model)
	}
	if in.Resume {
		if !strings.HasPrefix(in.SessionID, "ses_") {
			return runner.Invocation{}, fmt.Errorf("opencode: resume needs a ses_… session id, got %q", in.SessionID)
		}
		cmd = append(cmd, "--session", in.SessionID)
	} else if in.SessionName != "" {
		cmd = append(cmd, "--title", in.SessionName)
	}
	cmd = append(cmd, prompt)
	var env []string
	if in.SessionName != "" || in.Resume {
		// The Executor mounts SessionStatePath only for runs with a session; opencode does not
		// create OPENCODE_DB's directory (exit 1 "unable to open database file" [obs 1.18.33,
		// runner/agent/realcli]), so a run without a session keeps the default database.
		env = append(env, "OPENCODE_DB="+DBPath)
	}
	env = append(env, "OPENCODE_DISABLE_AUTOUPDATE=true", a.cfg.APIKeyEnv+"="+a.cfg.APIKey)
	if a.cfg.ConfigContent != "" {
		env = append(env, "OPENCODE_CONFIG_CONTENT="+a.cfg.ConfigContent)
	}
	return runner.Invocation{Image: a.cfg.Image, Cmd: cmd, Env: env}, nil
}

// Result is ResultStderr without stderr. A resume refusal is then inferred from its shape:
// Resume, exit code ResumeMissExitCode and no event at all on stdout (§3 Failure detection).
func (a *Agent) Result(in phase.Input, exit runner.ExitState, stdout []byte, outDir string) (*phase.Result, error) {
	return a.ResultStderr(in, exit, stdout, nil, outDir)
}

// ResultStderr reads the run's outcome. Order of checks:
//
//  1. a resume refused (stderr "Error: Session not found", ANSI codes stripped; or, without
//     stderr, exit 1 and no event) → *clikit.SessionNotFoundError (errors.Is
//     runner.ErrSessionNotFound);
//  2. killed by Alfred → error;
//  3. exit ≠ 0, an error event, or no event with a sessionID → error (§3 Failure detection);
//  4. a resumed run whose events carry another sessionID → error (*clikit.MismatchError);
//  5. /alfred/out/result.json, or the text of the last step as a JSON object (§3 Output "Final
//     text"); otherwise runner.ErrNoResult.
//
// The Result gets SessionID and the sums over this run's step_finish events: input tokens
// (input plus cache reads and writes), output tokens (output plus reasoning) and cost (USD).
func (a *Agent) ResultStderr(in phase.Input, exit runner.ExitState, stdout, stderr []byte, outDir string) (*phase.Result, error) {
	s := ParseStream(stdout)
	if in.Resume {
		if l := clikit.StderrLine(stderr, resumeMissText); l != "" {
			return nil, &clikit.SessionNotFoundError{Agent: Name, SessionID: in.SessionID, Signal: l}
		}
		if stderr == nil && exit.Code == ResumeMissExitCode && !exit.Killed && s.Events == 0 {
			return nil, &clikit.SessionNotFoundError{Agent: Name, SessionID: in.SessionID,
				Signal: "exit 1 with no event (inferred; stderr not available)"}
		}
	}
	if exit.Killed {
		return nil, fmt.Errorf("opencode: killed (exit code %d)", exit.Code)
	}
	if exit.Code != 0 || len(s.Errors) > 0 || s.SessionID == "" {
		return nil, fmt.Errorf("opencode: run failed (exit code %d, session %q): %s", exit.Code, s.SessionID, strings.Join(s.Errors, "; "))
	}
	if in.Resume && (s.SessionID != in.SessionID || s.OtherSessionID != "") {
		got := s.SessionID
		if got == in.SessionID {
			got = s.OtherSessionID
		}
		return nil, &clikit.MismatchError{Agent: Name, Requested: in.SessionID, Got: got}
	}
	r, err := clikit.ReadResult(in, outDir, s.FinalText)
	if err != nil {
		return nil, err
	}
	r.SessionID = s.SessionID
	r.InputTokens, r.OutputTokens, r.CostUSD = s.InputTokens, s.OutputTokens, s.CostUSD
	return r, nil
}
