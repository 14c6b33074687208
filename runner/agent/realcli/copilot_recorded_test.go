package realcli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest/mockmodel"
	"github.com/alfred-bot/alfred/runner/agent/copilot"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Copilot CLI: the caller chooses the session UUID (--session-id on the first run, then
// --resume=<id>). The BYOK key is long: Copilot redacts secret values from its output, and a
// short one mangles unrelated words (spec/agents.md §4 Output).
const (
	copilotTestdata  = "../copilot/testdata"
	copilotSessionID = "77777777-2222-4333-8444-555555555555"
	copilotUnknownID = "0badc0de-0000-4000-8000-00000000000c"
	copilotKey       = "sk-copilot-mock-not-real-0123456789"
)

// newCopilot configures the adapter for BYOK against the mock: provider type "openai" (wire
// API "completions", the default: POST <base>/chat/completions), base URL baseURL (mock
// URL+"/v1"), model mock-model.
func newCopilot(t *testing.T, baseURL string) *copilot.Agent {
	t.Helper()
	a, err := copilot.New(copilot.Config{Image: "realcli-host", Model: mockmodel.ChatModel,
		BaseURL: baseURL, ProviderType: "openai", APIKey: copilotKey})
	require.NoError(t, err)
	return a
}

// copilotUsageName is the recorded --usage-output-file of a run: real_<version>_<run>.usage.json.
func copilotUsageName(version, run string) string { return recordName(version, run) + ".usage.json" }

// checkCopilot asserts what the adapter reads from one Copilot CLI run (live or recorded). usage
// is the run's --usage-output-file (nil when the CLI wrote none).
func checkCopilot(t *testing.T, run string, stdout []byte, m Meta, usage []byte) *copilot.Stream {
	t.Helper()
	a := newCopilot(t, "http://127.0.0.1:1/v1")
	s := copilot.ParseStream(stdout)
	exit := runner.ExitState{Code: m.ExitCode}
	empty := t.TempDir()
	require.Zero(t, s.Skipped, "every stdout line is a JSON event")
	require.NotContains(t, string(stdout), copilotKey, "the key is not in the stream")
	switch run {
	case runFresh, runResumed:
		require.Equal(t, 0, m.ExitCode, m.Stderr)
		require.Equal(t, copilotSessionID, m.Input.SessionID)
		if run == runResumed {
			require.Contains(t, m.Cmd, "--resume="+copilotSessionID)
			require.NotContains(t, m.Cmd, "--session-id")
		} else {
			require.Equal(t, copilotSessionID, m.Cmd[slices.Index(m.Cmd, "--session-id")+1])
		}
		require.NotNil(t, s.Final, "a result event")
		require.Equal(t, copilotSessionID, s.Final.SessionID)
		require.Zero(t, s.Final.ExitCode)
		require.Empty(t, s.Errors)
		require.False(t, s.Aborted)
		require.True(t, strings.HasPrefix(s.FinalText, mockmodel.ReplyPrefix), s.FinalText)
		require.Contains(t, s.FinalText, "MARK-ALPHA")
		if run == runResumed {
			require.Contains(t, s.FinalText, "MARK-BETA", "run 2's own mark")
		}
		// Tokens are only in the usage file. Each run made one mock request (120/9); after the
		// resume the file holds the session totals (240/18, requests.count 2).
		require.NotNil(t, usage, "--usage-output-file was written")
		u := copilotUsage(t, usage)
		require.Contains(t, u.ModelMetrics, mockmodel.ChatModel)
		runs := int64(1)
		if run == runResumed {
			runs = 2
		}
		in, out := u.Tokens()
		require.EqualValues(t, runs*mockmodel.InputTokens, in)
		require.EqualValues(t, runs*mockmodel.OutputTokens, out)
		// The agent did not write result.json (the mock only talks): everything before it
		// passed, including the session id check.
		_, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), empty)
		require.ErrorIs(t, err, phase.ErrNoResult)
		_, err = a.Result(m.Input, exit, stdout, empty)
		require.ErrorIs(t, err, phase.ErrNoResult)
		// With the result file an agent would write and the usage file the CLI wrote: session
		// id and tokens reach the Result.
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "result.json"), []byte(`{"summary":"s","answer":"a"}`), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, copilot.UsageFile), usage, 0o644))
		r, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), dir)
		require.NoError(t, err)
		require.Equal(t, copilotSessionID, r.SessionID)
		require.EqualValues(t, runs*mockmodel.InputTokens, r.InputTokens)
		require.EqualValues(t, runs*mockmodel.OutputTokens, r.OutputTokens)
		require.Zero(t, r.CostUSD, "Copilot bills premium requests, not dollars")
		if run == runResumed {
			// The usage file holds the session's totals after a resume: the run's own usage is
			// the difference with the fresh run's (CumulativeUsage).
			prev := phase.Result{SessionID: copilotSessionID, InputTokens: mockmodel.InputTokens, OutputTokens: mockmodel.OutputTokens}
			require.True(t, a.Capabilities().CumulativeUsage)
			din, dout, _ := runner.UsageDelta(prev, *r, true)
			require.EqualValues(t, mockmodel.InputTokens, din, "the resumed run's own input tokens")
			require.EqualValues(t, mockmodel.OutputTokens, dout, "the resumed run's own output tokens")
		}
	case runResumeMiss:
		require.Equal(t, copilot.ResumeMissExitCode, m.ExitCode)
		require.Zero(t, s.Events, "nothing on stdout")
		require.Nil(t, usage, "no usage file")
		require.Contains(t, m.Stderr, "No session, task, or name matched '"+copilotUnknownID+"'")
		_, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), empty)
		require.ErrorIs(t, err, runner.ErrSessionNotFound)
		require.Contains(t, err.Error(), m.Input.SessionID)
		_, err = a.Result(m.Input, exit, stdout, empty) // without stderr: inferred from the shape
		require.ErrorIs(t, err, runner.ErrSessionNotFound)
	}
	return s
}

func copilotUsage(t *testing.T, b []byte) *copilot.Usage {
	t.Helper()
	p := filepath.Join(t.TempDir(), copilot.UsageFile)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	u, err := copilot.ReadUsage(p)
	require.NoError(t, err)
	return u
}

// TestRecordedCopilotStreams is TestRecordedClaudeStreams for Copilot CLI: every recorded
// version's real streams and usage files, parsed again through the adapter (no npm needed).
func TestRecordedCopilotStreams(t *testing.T) {
	versions := recordedVersions(t, copilotTestdata)
	if len(versions) == 0 {
		t.Skipf("no %s/real_*.jsonl recorded: make realcli-test REALCLI_ARGS=-update", copilotTestdata)
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			for _, run := range []string{runFresh, runResumed, runResumeMiss} {
				stdout, m, ok := readRecorded(t, copilotTestdata, v, run)
				require.True(t, ok, "%s %s recorded", v, run)
				require.Equal(t, v, m.Version)
				usage, err := os.ReadFile(filepath.Join(copilotTestdata, copilotUsageName(v, run)))
				if os.IsNotExist(err) {
					usage, err = nil, nil
				}
				require.NoError(t, err)
				t.Run(run, func(t *testing.T) {
					golden(t, copilotTestdata, "parse_"+recordName(v, run)+".golden.json", checkCopilot(t, run, stdout, m, usage))
				})
			}
		})
	}
}
