// Package gemini is the "gemini" agent adapter for Google's Gemini CLI (npm @google/gemini-cli).
//
// Facts about the CLI come from spec/agents.md §5 (Gemini CLI 0.61.0) and its "Adapter notes";
// each use below cites the subsection. What every CLI adapter shares is clikit.Agent; this
// package declares the CLI.
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

// Config configures the adapter: Image (the gemini binary on PATH), APIKey (passed as
// GEMINI_API_KEY, §5 Auth and version; env only), and optionally Binary ("gemini"), Model
// (-m), BaseURL (GOOGLE_GEMINI_BASE_URL; headless validation then also needs
// security.auth.selectedType "gemini-api-key" in the image's settings, §5 Auth) and
// VerifiedVersions.
type Config = clikit.Config

// cli declares Gemini for the shared adapter base. The session id must be a UUID; Gemini has no
// session name (titles are derived). Usage is treated as per run: result.stats after a resume
// was not observed as cumulative (§5 Output).
var cli = &clikit.CLI{
	Name:      Name,
	Binary:    "gemini",
	Args:      []string{"-p", clikit.PromptArg, "-o", "stream-json", "--skip-trust", "--approval-mode", "yolo"},
	ModelFlag: "-m",
	Sessions: clikit.Sessions{NewFlag: "--session-id", ResumeFlag: "--resume",
		ValidID: clikit.IsUUID, IDKind: "a UUID"},
	KeyEnv:           "GEMINI_API_KEY",
	BaseURLEnv:       "GOOGLE_GEMINI_BASE_URL",
	Egress:           func(Config) []string { return []string{"generativelanguage.googleapis.com:443"} },
	SessionStatePath: SessionStatePath,
	CallerChosenID:   true,
	Verified:         VerifiedVersions,
	// 42 is any input error: the stderr line counts only with it; without stderr, exit 42 and
	// no init event (§5 Failure detection).
	ResumeMiss: clikit.ResumeMiss{Text: resumeMissText, ExitCode: ResumeMissExitCode, OnlyWithExitCode: true,
		Inferred: "exit 42 before init (inferred; stderr not available)"},
	Read: read,
}

// Agent is the Gemini adapter (clikit.Agent over cli); it implements runner.SessionAgent.
type Agent = clikit.Agent

// New returns the adapter. Errors: no image, or no API key.
func New(cfg Config) (*Agent, error) { return clikit.New(cli, cfg) }

// read reads the stream (§5 Output, Failure detection): the run failed with exit ≠ 0 (named
// with ExitReasons), no result event, result.status ≠ "success" or an error event of severity
// error. The session is init.session_id, usage result.stats input_tokens and output_tokens (no
// cost), the final text the assistant text after the last tool call.
func read(_ phase.Input, exit runner.ExitState, stdout, stderr []byte, _ string) clikit.Reading {
	s := ParseStream(stdout)
	r := clikit.Reading{Started: s.SessionID != "", SessionID: s.SessionID, FinalText: s.FinalText}
	switch {
	case exit.Code != 0:
		r.Failure = fmt.Errorf("gemini: run failed (exit code %d: %s): %s", exit.Code, ExitReasons[exit.Code],
			strings.Join(append(s.Errors, firstLine(stderr)), "; "))
	case s.Final == nil || s.Final.Status != "success" || len(s.Errors) > 0:
		status := "no result event"
		if s.Final != nil {
			status = "status " + s.Final.Status
		}
		r.Failure = fmt.Errorf("gemini: run failed (%s): %s", status, strings.Join(s.Errors, "; "))
	default:
		r.InputTokens, r.OutputTokens = s.Final.Stats.InputTokens, s.Final.Stats.OutputTokens
	}
	return r
}

func firstLine(b []byte) string {
	l, _, _ := strings.Cut(strings.TrimSpace(clikit.StripANSI(string(b))), "\n")
	return l
}
