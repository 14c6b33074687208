// Package gemini is the "gemini" agent adapter for Google's Gemini CLI (npm @google/gemini-cli).
//
// Facts about the CLI come from spec/agents.md, section 5 (Gemini CLI
// 0.61.0) and its "Adapter notes"; each use below cites the subsection.
//
// The run is headless: `gemini -p <prompt> -o stream-json --skip-trust --approval-mode yolo
// [-m M] (--session-id <uuid> | --resume <uuid>)` (§5 Invocation; without --skip-trust a
// headless run in an untrusted folder exits 55). The prompt is the -p argument: stdin is closed,
// and -p would be appended to piped stdin (spec/agents.md "General rules"). The API key travels
// only in the environment as GEMINI_API_KEY (§5 Auth and version).
//
// Sessions: the caller chooses the UUID of a new session with --session-id (reusing it exits 42
// "already exists"), and resumes with --resume <uuid>, never `--resume latest`, which silently
// starts a new session when there is none (§5 Sessions). Sessions are keyed by project, the
// cwd's basename in 0.61.0: with cwd /workspace they live in ~/.gemini/tmp/workspace/chats, and a
// resume from another cwd fails (§5 Sessions). Gemini deletes sessions older than 30 days by
// default (general.sessionRetention), which the image's settings should turn off.
package gemini

import (
	"errors"
	"fmt"
	"strings"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Name is the adapter name used in config.
const Name = "gemini"

// SessionStatePath is where the mailbox's session directory is mounted: the chats dir of the
// project "workspace" (cwd /workspace), ~/.gemini/tmp/workspace/chats (§5 Sessions: persisting
// only chats/ is enough; credentials and settings sit elsewhere under ~/.gemini).
const SessionStatePath = runner.HomeDir + "/.gemini/tmp/workspace/chats"

// SIGTERMExitCode is the CLI's exit code when stopped with SIGTERM: 1, like a general error
// (§5 Failure detection [obs]).
const SIGTERMExitCode = 1

// ResumeMissExitCode is Gemini's exit code for an input error, which includes a refused resume
// (stderr "Error resuming session: …", nothing useful on stdout; §5 Failure detection).
const ResumeMissExitCode = 42

const resumeMissText = "Error resuming session"

// ExitReasons names Gemini's headless exit codes (§5 Failure detection).
var ExitReasons = map[int]string{
	1: "general or API error", 41: "authentication", 42: "input error", 44: "sandbox",
	52: "configuration", 53: "turn limit", 54: "tool execution", 55: "untrusted workspace", 130: "cancelled",
}

// VerifiedVersions is the conservative set of versions on which resume by id is verified: the
// 0.61 line from the tested 0.61.0 (§5 [obs 0.61.0]; --session-id exists since PR #26060 and
// the project slug changed from a hash to the basename, so other lines are not trusted).
var VerifiedVersions = clikit.Versions{MinPatch: map[string]int{"0.61": 0}}

// Config configures the adapter.
type Config struct {
	// Image has the gemini binary on PATH and runs as non-root.
	Image string `json:"image" yaml:"image"`
	// Binary is the CLI executable ("gemini" if empty).
	Binary string `json:"binary,omitempty" yaml:"binary"`
	// Model is the default -m when Input.Model is empty; "" leaves the CLI's default.
	Model string `json:"model,omitempty" yaml:"model"`
	// APIKey is passed as GEMINI_API_KEY (§5 Auth and version). Secret: env only.
	APIKey string `json:"-" yaml:"-"`
	// BaseURL, when set, is passed as GOOGLE_GEMINI_BASE_URL; headless validation then also
	// needs security.auth.selectedType "gemini-api-key" in the image's settings (§5 Auth).
	BaseURL string `json:"base_url,omitempty" yaml:"base_url"`
	// VerifiedVersions lists further CLI versions (exact) on which resume by id was checked.
	VerifiedVersions []string `json:"verified_versions,omitempty" yaml:"verified_versions"`
}

// Agent is the Gemini adapter; it implements runner.SessionAgent.
type Agent struct {
	cfg Config
}

var _ runner.SessionAgent = (*Agent)(nil)

// New returns the adapter. Errors: no image, or no API key.
func New(cfg Config) (*Agent, error) {
	if cfg.Image == "" {
		return nil, errors.New("gemini: image is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("gemini: API key is required")
	}
	if cfg.Binary == "" {
		cfg.Binary = "gemini"
	}
	return &Agent{cfg: cfg}, nil
}

// Name returns "gemini".
func (a *Agent) Name() string { return Name }

// Capabilities declares resumable sessions with caller-chosen UUIDs (§5 Sessions) stored under
// SessionStatePath. Usage is treated as per run: result.stats after a resume was not observed
// as cumulative (§5 Output).
func (a *Agent) Capabilities() runner.Capabilities {
	return runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  SessionStatePath,
		CallerChosenID:    true,
		CumulativeUsage:   false,
		VersionCommand:    []string{a.cfg.Binary, "--version"},
	}
}

// ParseVersion extracts "0.61.0" from `gemini --version` output "0.61.0" (§5 Auth and version).
func (a *Agent) ParseVersion(output string) (string, error) { return clikit.ParseVersion(Name, output) }

// ResumeVerified reports whether version is in VerifiedVersions or Config.VerifiedVersions.
func (a *Agent) ResumeVerified(version string) bool {
	return VerifiedVersions.VerifiedWith(version, a.cfg.VerifiedVersions)
}

// Command compiles the headless invocation (see the package doc). The session id must be a
// UUID. Gemini has no session name (titles are derived), so SessionName is unused. No secret is
// in Cmd.
func (a *Agent) Command(in phase.Input) (runner.Invocation, error) {
	prompt, err := clikit.Prompt(Name, in)
	if err != nil {
		return runner.Invocation{}, err
	}
	cmd := []string{a.cfg.Binary, "-p", prompt, "-o", "stream-json", "--skip-trust", "--approval-mode", "yolo"}
	if model := clikit.Model(in, a.cfg.Model); model != "" {
		cmd = append(cmd, "-m", model)
	}
	if in.SessionID != "" {
		if !clikit.IsUUID(in.SessionID) {
			return runner.Invocation{}, fmt.Errorf("gemini: session id %q is not a UUID", in.SessionID)
		}
		if in.Resume {
			cmd = append(cmd, "--resume", in.SessionID)
		} else {
			cmd = append(cmd, "--session-id", in.SessionID)
		}
	}
	env := []string{"GEMINI_API_KEY=" + a.cfg.APIKey}
	if a.cfg.BaseURL != "" {
		env = append(env, "GOOGLE_GEMINI_BASE_URL="+a.cfg.BaseURL)
	}
	return runner.Invocation{Image: a.cfg.Image, Cmd: cmd, Env: env}, nil
}

// Result is ResultStderr without stderr. A resume refusal is then inferred from its shape:
// Resume, exit code 42 and no init event on stdout (§5 Failure detection).
func (a *Agent) Result(in phase.Input, exit runner.ExitState, stdout []byte, outDir string) (*phase.Result, error) {
	return a.ResultStderr(in, exit, stdout, nil, outDir)
}

// ResultStderr reads the run's outcome. Order of checks:
//
//  1. a resume refused (exit 42 and stderr "Error resuming session", or, without stderr, exit
//     42 and no init event) → *clikit.SessionNotFoundError (errors.Is runner.ErrSessionNotFound);
//  2. killed by Alfred → error;
//  3. exit ≠ 0 (named with ExitReasons), no result event, result.status ≠ "success" or an
//     error event of severity error → error;
//  4. a run with a session id whose init.session_id differs → error (*clikit.MismatchError);
//  5. /alfred/out/result.json, or the assistant text after the last tool call as a JSON object
//     (§5 Output "Final text"); otherwise runner.ErrNoResult.
//
// The Result gets SessionID and result.stats input_tokens and output_tokens; Gemini reports no
// cost (CostUSD stays 0).
func (a *Agent) ResultStderr(in phase.Input, exit runner.ExitState, stdout, stderr []byte, outDir string) (*phase.Result, error) {
	s := ParseStream(stdout)
	if in.Resume && exit.Code == ResumeMissExitCode && !exit.Killed {
		if l := clikit.StderrLine(stderr, resumeMissText); l != "" {
			return nil, &clikit.SessionNotFoundError{Agent: Name, SessionID: in.SessionID, Signal: l}
		}
		if stderr == nil && s.SessionID == "" {
			return nil, &clikit.SessionNotFoundError{Agent: Name, SessionID: in.SessionID,
				Signal: "exit 42 before init (inferred; stderr not available)"}
		}
	}
	if exit.Killed {
		return nil, fmt.Errorf("gemini: killed (exit code %d)", exit.Code)
	}
	if exit.Code != 0 {
		return nil, fmt.Errorf("gemini: run failed (exit code %d: %s): %s", exit.Code, ExitReasons[exit.Code],
			strings.Join(append(s.Errors, firstLine(stderr)), "; "))
	}
	if s.Final == nil || s.Final.Status != "success" || len(s.Errors) > 0 {
		status := "no result event"
		if s.Final != nil {
			status = "status " + s.Final.Status
		}
		return nil, fmt.Errorf("gemini: run failed (%s): %s", status, strings.Join(s.Errors, "; "))
	}
	if in.SessionID != "" && s.SessionID != in.SessionID {
		return nil, &clikit.MismatchError{Agent: Name, Requested: in.SessionID, Got: s.SessionID}
	}
	r, err := clikit.ReadResult(in, outDir, s.FinalText)
	if err != nil {
		return nil, err
	}
	r.SessionID = s.SessionID
	r.InputTokens, r.OutputTokens = s.Final.Stats.InputTokens, s.Final.Stats.OutputTokens
	return r, nil
}

func firstLine(b []byte) string {
	l, _, _ := strings.Cut(strings.TrimSpace(clikit.StripANSI(string(b))), "\n")
	return l
}
