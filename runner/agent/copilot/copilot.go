// Package copilot is the "copilot" agent adapter for the GitHub Copilot CLI (npm @github/copilot).
//
// Facts about the CLI come from spec/agents.md, section 4 (Copilot CLI
// 1.0.102) and its "Adapter notes"; each use below cites the subsection.
//
// The run is headless: `copilot -p <prompt> --output-format json --allow-all --no-ask-user
// --no-auto-update [--model M] (--session-id <uuid> [-n NAME] | --resume=<uuid>)
// --usage-output-file /alfred/out/copilot-usage.json` (§4 Invocation). The prompt is the -p
// argument (stdin is closed). Tokens are not in the stream, hence the usage file (§4 Output).
// Credentials travel only in the environment: COPILOT_GITHUB_TOKEN, or the BYOK provider
// variables (§4 Auth and version).
//
// Sessions: the caller chooses the UUID (§4 Sessions). `--session-id <uuid>` creates the
// session or resumes it; a new session uses it (with -n on that first run only: since 1.0.71
// --name with the id of an existing session is an error). A resume uses `--resume=<uuid>`
// instead, because `--session-id` of an unknown UUID silently creates an empty session with that
// id (indistinguishable by id from the real one), while --resume refuses an unknown id with
// "No session, task, or name matched" (§4 Failure detection). Never --continue (Adapter notes 2).
//
// Trap: Copilot exits 0 on SIGTERM, ending the stream with assistant.idle {"aborted":true} and
// no result event (§4 Failure detection, Adapter notes 5): see SIGTERMExitCode. Result trusts
// ExitState.Killed and requires the result event.
package copilot

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Name is the adapter name used in config.
const Name = "copilot"

// SessionStatePath is where the mailbox's session directory is mounted:
// ~/.copilot/session-state (§4 Sessions: persisting only this dir is enough; config.json beside
// it can hold the OAuth token).
const SessionStatePath = runner.HomeDir + "/.copilot/session-state"

// SIGTERMExitCode is the CLI's exit code when stopped with SIGTERM: 0, like a success
// (§4 Failure detection). Only ExitState.Killed and the missing result event tell them apart.
const SIGTERMExitCode = 0

// ResumeMissExitCode is Copilot's exit code for `--resume=<unknown id>`, with stderr
// "Error: No session, task, or name matched '<id>'." and no JSON (§4 Failure detection).
const ResumeMissExitCode = 1

const resumeMissText = "No session, task, or name matched"

// UsageFile is the base name of the --usage-output-file, written in /alfred/out.
const UsageFile = "copilot-usage.json"

// VerifiedVersions is the conservative set of versions on which resume by id is verified: the
// 1.0 line from the tested 1.0.102 (§4 [obs 1.0.102]; --session-id semantics date from 1.0.51,
// the --name rule from 1.0.71).
var VerifiedVersions = clikit.Versions{MinPatch: map[string]int{"1.0": 102}}

// Config configures the adapter.
type Config struct {
	// Image has the copilot binary on PATH and runs as non-root.
	Image string `json:"image" yaml:"image"`
	// Binary is the CLI executable ("copilot" if empty).
	Binary string `json:"binary,omitempty" yaml:"binary"`
	// Model is the default --model when Input.Model is empty; "" leaves the CLI's default.
	Model string `json:"model,omitempty" yaml:"model"`
	// Token is passed as COPILOT_GITHUB_TOKEN (a fine-grained PAT with "Copilot Requests" or an
	// OAuth token; not a classic ghp_ token, §4 Auth and version). Secret: env only.
	Token string `json:"-" yaml:"-"`
	// ProviderBaseURL, ProviderType and ProviderAPIKey configure BYOK without GitHub
	// (COPILOT_PROVIDER_BASE_URL, _TYPE, _API_KEY; §4 Auth and version). The key is secret.
	ProviderBaseURL string `json:"provider_base_url,omitempty" yaml:"provider_base_url"`
	ProviderType    string `json:"provider_type,omitempty" yaml:"provider_type"`
	ProviderAPIKey  string `json:"-" yaml:"-"`
	// VerifiedVersions lists further CLI versions (exact) on which resume by id was checked.
	VerifiedVersions []string `json:"verified_versions,omitempty" yaml:"verified_versions"`
}

// Agent is the Copilot adapter; it implements runner.SessionAgent.
type Agent struct {
	cfg Config
}

var _ runner.SessionAgent = (*Agent)(nil)

// New returns the adapter. Errors: no image, or neither a token nor a BYOK provider key.
func New(cfg Config) (*Agent, error) {
	if cfg.Image == "" {
		return nil, errors.New("copilot: image is required")
	}
	if cfg.Token == "" && (cfg.ProviderAPIKey == "" || cfg.ProviderBaseURL == "") {
		return nil, errors.New("copilot: a GitHub token or a BYOK provider (base URL and key) is required")
	}
	if cfg.Binary == "" {
		cfg.Binary = "copilot"
	}
	return &Agent{cfg: cfg}, nil
}

// Name returns "copilot".
func (a *Agent) Name() string { return Name }

// Capabilities declares resumable sessions with caller-chosen UUIDs (§4 Sessions) stored under
// SessionStatePath. CumulativeUsage is true: after a resume the --usage-output-file holds the
// whole session's totals (observed with the real CLI 1.0.102, runner/agent/copilot/testdata:
// 240/18 tokens after a 120/9 run), so Alfred records the difference per run.
func (a *Agent) Capabilities() runner.Capabilities {
	return runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  SessionStatePath,
		CallerChosenID:    true,
		CumulativeUsage:   true,
		VersionCommand:    []string{a.cfg.Binary, "--version"},
	}
}

// ParseVersion extracts "1.0.102" from `copilot --version` output "GitHub Copilot CLI
// 1.0.102." followed by an update hint line (§4 Auth and version).
func (a *Agent) ParseVersion(output string) (string, error) { return clikit.ParseVersion(Name, output) }

// ResumeVerified reports whether version is in VerifiedVersions or Config.VerifiedVersions.
func (a *Agent) ResumeVerified(version string) bool {
	return VerifiedVersions.VerifiedWith(version, a.cfg.VerifiedVersions)
}

// Command compiles the headless invocation (see the package doc). The session id must be a
// UUID: a non-UUID that matches nothing cannot create a session (§4 Sessions). No secret is in
// Cmd.
func (a *Agent) Command(in phase.Input) (runner.Invocation, error) {
	prompt, err := clikit.Prompt(Name, in)
	if err != nil {
		return runner.Invocation{}, err
	}
	cmd := []string{a.cfg.Binary, "-p", prompt, "--output-format", "json",
		"--allow-all", "--no-ask-user", "--no-auto-update"}
	if model := clikit.Model(in, a.cfg.Model); model != "" {
		cmd = append(cmd, "--model", model)
	}
	if in.SessionID != "" {
		if !clikit.IsUUID(in.SessionID) {
			return runner.Invocation{}, fmt.Errorf("copilot: session id %q is not a UUID", in.SessionID)
		}
		if in.Resume {
			cmd = append(cmd, "--resume="+in.SessionID)
		} else {
			cmd = append(cmd, "--session-id", in.SessionID)
			if in.SessionName != "" {
				cmd = append(cmd, "-n", in.SessionName)
			}
		}
	}
	cmd = append(cmd, "--usage-output-file", runner.OutputDir+"/"+UsageFile)
	env := []string{"COPILOT_AUTO_UPDATE=false"}
	if a.cfg.Token != "" {
		env = append(env, "COPILOT_GITHUB_TOKEN="+a.cfg.Token)
	}
	if a.cfg.ProviderBaseURL != "" {
		env = append(env, "COPILOT_PROVIDER_BASE_URL="+a.cfg.ProviderBaseURL)
		if a.cfg.ProviderType != "" {
			env = append(env, "COPILOT_PROVIDER_TYPE="+a.cfg.ProviderType)
		}
		if a.cfg.ProviderAPIKey != "" {
			env = append(env, "COPILOT_PROVIDER_API_KEY="+a.cfg.ProviderAPIKey)
		}
		if a.cfg.Token == "" {
			// Provider-only: no GitHub call is needed, and without this the CLI still looks up
			// api.github.com (seen with the real CLI 1.0.102, runner/agent/copilot/testdata).
			env = append(env, "COPILOT_OFFLINE=true")
		}
	}
	return runner.Invocation{Image: a.cfg.Image, Cmd: cmd, Env: env}, nil
}

// Result is ResultStderr without stderr. A resume refusal is then inferred from its shape:
// Resume, exit code ResumeMissExitCode and no event at all on stdout (§4 Failure detection:
// "no JSON").
func (a *Agent) Result(in phase.Input, exit runner.ExitState, stdout []byte, outDir string) (*phase.Result, error) {
	return a.ResultStderr(in, exit, stdout, nil, outDir)
}

// ResultStderr reads the run's outcome. Order of checks:
//
//  1. a resume refused (stderr "No session, task, or name matched", or, without stderr, exit 1
//     and no event) → *clikit.SessionNotFoundError (errors.Is runner.ErrSessionNotFound);
//  2. killed by Alfred → error, even with exit code 0 (SIGTERMExitCode);
//  3. no result event (an aborted stream), exit ≠ 0, result.exitCode ≠ 0 or a session.error →
//     error (§4 Failure detection: "Treat a missing result as failure");
//  4. a run with a session id whose result.sessionId differs → error (*clikit.MismatchError);
//  5. /alfred/out/result.json, or the last assistant.message content as a JSON object (§4
//     Output "Final text"); otherwise runner.ErrNoResult.
//
// The Result gets SessionID from the result event, and tokens from the usage file
// (outDir/UsageFile: input and output tokens summed over modelMetrics, cache counts left out);
// Copilot bills in premium requests, not dollars, so CostUSD stays 0.
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
		return nil, fmt.Errorf("copilot: killed (exit code %d; Copilot exits %d on SIGTERM)", exit.Code, SIGTERMExitCode)
	}
	if s.Final == nil {
		return nil, fmt.Errorf("copilot: no result event in the output (exit code %d, aborted %t): %v", exit.Code, s.Aborted, s.Errors)
	}
	if exit.Code != 0 || s.Final.ExitCode != 0 || len(s.Errors) > 0 {
		return nil, fmt.Errorf("copilot: run failed (exit code %d, result exitCode %d): %v", exit.Code, s.Final.ExitCode, s.Errors)
	}
	if in.SessionID != "" && s.Final.SessionID != in.SessionID {
		return nil, &clikit.MismatchError{Agent: Name, Requested: in.SessionID, Got: s.Final.SessionID}
	}
	r, err := clikit.ReadResult(in, outDir, s.FinalText)
	if err != nil {
		return nil, err
	}
	r.SessionID = s.Final.SessionID
	if u, err := ReadUsage(filepath.Join(outDir, UsageFile)); err == nil {
		r.InputTokens, r.OutputTokens = u.Tokens()
	}
	return r, nil
}

// Usage is the JSON written by --usage-output-file (§4 Output [obs]); token counts per model.
type Usage struct {
	ModelMetrics map[string]struct {
		Usage struct {
			InputTokens      int64 `json:"inputTokens"`
			OutputTokens     int64 `json:"outputTokens"`
			CacheReadTokens  int64 `json:"cacheReadTokens"`
			CacheWriteTokens int64 `json:"cacheWriteTokens"`
		} `json:"usage"`
	} `json:"modelMetrics"`
	// TotalPremiumRequestCost is in premium requests, not dollars; TotalNanoAiu in AI units.
	TotalPremiumRequestCost float64 `json:"totalPremiumRequestCost"`
	TotalNanoAiu            float64 `json:"totalNanoAiu"`
}

// Tokens sums input and output tokens over the models.
func (u *Usage) Tokens() (in, out int64) {
	for _, m := range u.ModelMetrics {
		in += m.Usage.InputTokens
		out += m.Usage.OutputTokens
	}
	return in, out
}

// ReadUsage reads a usage file; a missing or unreadable file is an error.
func ReadUsage(path string) (*Usage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var u Usage
	if err := json.Unmarshal(data, &u); err != nil {
		return nil, fmt.Errorf("copilot: usage file: %w", err)
	}
	return &u, nil
}
