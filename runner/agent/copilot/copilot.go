// Package copilot is the "copilot" agent adapter for the GitHub Copilot CLI (npm @github/copilot).
//
// Facts about the CLI come from spec/agents.md §4 (Copilot CLI 1.0.102) and its "Adapter
// notes"; each use below cites the subsection. What every CLI adapter shares is clikit.Agent;
// this package declares the CLI.
//
// The run is headless: `copilot -p <prompt> --output-format json --allow-all --no-ask-user
// --no-auto-update [--model M] (--session-id <uuid> [-n NAME] | --resume=<uuid>)
// --usage-output-file /alfred/out/copilot-usage.json` (§4 Invocation). The prompt is the -p
// argument (stdin is closed). Tokens are not in the stream, hence the usage file (§4 Output).
// Credentials travel only in the environment: Config.APIKey is COPILOT_GITHUB_TOKEN, or, when
// Config.BaseURL is set (bring your own key), the provider's key in the BYOK provider variables
// (§4 Auth and version).
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
	"path/filepath"

	"github.com/alfred-bot/alfred/internal/base/runfile"
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

// Config configures the adapter: Image (the copilot binary on PATH), APIKey and optionally
// Binary ("copilot"), Model (--model), BaseURL, ProviderType and VerifiedVersions. Without
// BaseURL, APIKey is the GitHub token (COPILOT_GITHUB_TOKEN: a fine-grained PAT with "Copilot
// Requests" or an OAuth token; not a classic ghp_ token, §4 Auth and version). With BaseURL,
// the run is bring-your-own-key without GitHub: COPILOT_PROVIDER_BASE_URL, _TYPE (ProviderType)
// and _API_KEY (APIKey). The key is secret: env only.
type Config = clikit.Config

// cli declares Copilot for the shared adapter base. The session id must be a UUID: a non-UUID
// that matches nothing cannot create a session (§4 Sessions). CumulativeUsage is true: after a
// resume the --usage-output-file holds the whole session's totals (observed with the real CLI
// 1.0.102, runner/agent/copilot/testdata: 240/18 tokens after a 120/9 run).
var cli = &clikit.CLI{
	Name:   Name,
	Binary: "copilot",
	Args: []string{"-p", clikit.PromptArg, "--output-format", "json",
		"--allow-all", "--no-ask-user", "--no-auto-update"},
	ModelFlag: "--model",
	Sessions: clikit.Sessions{NewFlag: "--session-id", NameFlag: "-n", ResumeFlag: "--resume=",
		ValidID: clikit.IsUUID, IDKind: "a UUID"},
	Tail: []string{"--usage-output-file", runner.OutputDir + "/" + UsageFile},
	Env:  env,
	// Without BaseURL: the Copilot API and the GitHub API it exchanges the token with.
	Egress:           func(Config) []string { return []string{"api.githubcopilot.com:443", "api.github.com:443"} },
	SessionStatePath: SessionStatePath,
	CallerChosenID:   true,
	CumulativeUsage:  true,
	Verified:         VerifiedVersions,
	// Without stderr, a refusal is inferred from its shape: exit 1 and no event at all (§4
	// Failure detection: "no JSON").
	ResumeMiss: clikit.ResumeMiss{Text: resumeMissText, ExitCode: ResumeMissExitCode,
		Inferred: "exit 1 with no event (inferred; stderr not available)"},
	Read: read,
}

// env is the run's environment: no auto-update, and the GitHub token or the BYOK provider.
func env(cfg Config, _ phase.Input) []string {
	env := []string{"COPILOT_AUTO_UPDATE=false"}
	if cfg.BaseURL == "" {
		return append(env, "COPILOT_GITHUB_TOKEN="+cfg.APIKey)
	}
	env = append(env, "COPILOT_PROVIDER_BASE_URL="+cfg.BaseURL)
	if cfg.ProviderType != "" {
		env = append(env, "COPILOT_PROVIDER_TYPE="+cfg.ProviderType)
	}
	// Provider-only: no GitHub call is needed, and without COPILOT_OFFLINE the CLI still looks
	// up api.github.com (seen with the real CLI 1.0.102, runner/agent/copilot/testdata).
	return append(env, "COPILOT_PROVIDER_API_KEY="+cfg.APIKey, "COPILOT_OFFLINE=true")
}

// Agent is the Copilot adapter (clikit.Agent over cli); it implements runner.SessionAgent.
type Agent = clikit.Agent

// New returns the adapter. Errors: no image, or no key (neither a GitHub token nor a BYOK
// provider key).
func New(cfg Config) (*Agent, error) { return clikit.New(cli, cfg) }

// read reads the JSONL stream (§4 Output, Failure detection): the run failed without a result
// event (an aborted stream: Copilot exits 0 on SIGTERM), with exit ≠ 0, result.exitCode ≠ 0 or
// a session.error. The session is result.sessionId, the final text the last
// assistant.message content, and the tokens come from the usage file (outDir/UsageFile: input
// and output tokens summed over modelMetrics, cache counts left out); Copilot bills in premium
// requests, not dollars, so CostUSD stays 0.
func read(_ phase.Input, exit runner.ExitState, stdout, _ []byte, outDir string) clikit.Reading {
	s := ParseStream(stdout)
	r := clikit.Reading{Started: s.Events > 0, FinalText: s.FinalText}
	switch {
	case s.Final == nil:
		r.Failure = fmt.Errorf("copilot: no result event in the output (exit code %d, aborted %t): %v", exit.Code, s.Aborted, s.Errors)
		return r
	case exit.Code != 0 || s.Final.ExitCode != 0 || len(s.Errors) > 0:
		r.Failure = fmt.Errorf("copilot: run failed (exit code %d, result exitCode %d): %v", exit.Code, s.Final.ExitCode, s.Errors)
	}
	r.SessionID = s.Final.SessionID
	u, err := ReadUsage(filepath.Join(outDir, UsageFile))
	switch {
	case err == nil:
		r.InputTokens, r.OutputTokens = u.Tokens()
	case errors.Is(err, runfile.ErrRefused) && r.Failure == nil:
		r.Failure = fmt.Errorf("copilot: usage file: %w", err) // a link, a FIFO: hostile output
	}
	return r
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

// maxUsageBytes bounds the usage file (a few hundred bytes per model).
const maxUsageBytes = 1 << 20

// ReadUsage reads a usage file through internal/base/runfile (the agent writes it: no link out of
// its directory, a regular file of at most 1 MiB); a missing, refused (*runfile.RefusedError)
// or unreadable file is an error.
func ReadUsage(path string) (*Usage, error) {
	data, err := runfile.Read(filepath.Dir(path), filepath.Base(path), maxUsageBytes)
	if err != nil {
		return nil, err
	}
	var u Usage
	if err := json.Unmarshal(data, &u); err != nil {
		return nil, fmt.Errorf("copilot: usage file: %w", err)
	}
	return &u, nil
}
