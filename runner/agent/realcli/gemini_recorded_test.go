package realcli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest/mockmodel"
	"github.com/alfred-bot/alfred/runner/agent/gemini"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Gemini CLI: the caller chooses the session UUID (--session-id, then --resume).
const (
	geminiTestdata  = "../gemini/testdata"
	geminiSessionID = "66666666-2222-4333-8444-555555555555"
	geminiUnknownID = "0badc0de-0000-4000-8000-00000000000e"
)

func newGemini(t *testing.T, baseURL string) *gemini.Agent {
	t.Helper()
	a, err := gemini.New(gemini.Config{Image: "realcli-host", Model: "gemini-2.5-flash",
		APIKey: "AIza-gemini-mock-not-real", BaseURL: baseURL})
	require.NoError(t, err)
	return a
}

// checkGemini asserts what the adapter reads from one Gemini CLI run (live or recorded).
func checkGemini(t *testing.T, run string, stdout []byte, m Meta) *gemini.Stream {
	t.Helper()
	a := newGemini(t, "http://127.0.0.1:1")
	s := gemini.ParseStream(stdout)
	exit := runner.ExitState{Code: m.ExitCode}
	empty := t.TempDir()
	require.Zero(t, s.Skipped, "every stdout line is a JSON event")
	switch run {
	case runFresh, runResumed:
		require.Equal(t, 0, m.ExitCode, m.Stderr)
		require.Equal(t, geminiSessionID, s.SessionID)
		require.Equal(t, geminiSessionID, m.Input.SessionID)
		require.Equal(t, "gemini-2.5-flash", s.Model)
		require.Empty(t, s.Errors)
		require.NotNil(t, s.Final, "a result event")
		require.Equal(t, "success", s.Final.Status)
		require.True(t, strings.HasPrefix(s.FinalText, mockmodel.ReplyPrefix), s.FinalText)
		require.Contains(t, s.FinalText, "MARK-ALPHA")
		if run == runResumed {
			require.Contains(t, s.FinalText, "MARK-BETA", "run 2's own mark")
		}
		require.EqualValues(t, mockmodel.InputTokens, s.Final.Stats.InputTokens)
		require.EqualValues(t, mockmodel.OutputTokens, s.Final.Stats.OutputTokens)
		// The agent did not write result.json (the mock only talks): everything before it
		// passed, including the session id check.
		_, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), empty)
		require.ErrorIs(t, err, phase.ErrNoResult)
		_, err = a.Result(m.Input, exit, stdout, empty)
		require.ErrorIs(t, err, phase.ErrNoResult)
		// With the result file an agent would write: session id and usage reach the Result.
		out := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(out, "result.json"), []byte(`{"summary":"s","answer":"a"}`), 0o644))
		r, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), out)
		require.NoError(t, err)
		require.Equal(t, geminiSessionID, r.SessionID)
		require.EqualValues(t, mockmodel.InputTokens, r.InputTokens)
		require.EqualValues(t, mockmodel.OutputTokens, r.OutputTokens)
		require.Zero(t, r.CostUSD, "Gemini reports no cost")
	case runResumeMiss:
		require.Equal(t, gemini.ResumeMissExitCode, m.ExitCode)
		require.Empty(t, s.SessionID)
		require.Contains(t, m.Stderr, "Error resuming session")
		_, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), empty)
		require.ErrorIs(t, err, runner.ErrSessionNotFound)
		require.Contains(t, err.Error(), m.Input.SessionID)
		_, err = a.Result(m.Input, exit, stdout, empty) // without stderr: inferred from the shape
		require.ErrorIs(t, err, runner.ErrSessionNotFound)
	}
	return s
}

// TestRecordedGeminiStreams is TestRecordedClaudeStreams for Gemini CLI: every recorded version's
// real streams, parsed again through the adapter (no npm needed).
func TestRecordedGeminiStreams(t *testing.T) {
	versions := recordedVersions(t, geminiTestdata)
	if len(versions) == 0 {
		t.Skipf("no %s/real_*.jsonl recorded: make realcli-test REALCLI_ARGS=-update", geminiTestdata)
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			for _, run := range []string{runFresh, runResumed, runResumeMiss} {
				stdout, m, ok := readRecorded(t, geminiTestdata, v, run)
				require.True(t, ok, "%s %s recorded", v, run)
				require.Equal(t, v, m.Version)
				t.Run(run, func(t *testing.T) {
					golden(t, geminiTestdata, "parse_"+recordName(v, run)+".golden.json", checkGemini(t, run, stdout, m))
				})
			}
		})
	}
}
