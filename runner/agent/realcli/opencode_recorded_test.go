package realcli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest/mockmodel"
	"github.com/alfred-bot/alfred/runner/agent/opencode"
	"github.com/alfred-bot/alfred/runner/phase"
)

// opencode assigns its session ids (ses_…), so only the unknown one is fixed.
const (
	opencodeTestdata  = "../opencode/testdata"
	opencodeUnknownID = "ses_0badc0de0000realcliUnknown"
	opencodeKeyEnv    = "MOCK_MODEL_API_KEY"
)

var opencodeSessionRE = regexp.MustCompile(`^ses_[0-9A-Za-z]{26}$`)

// newOpencode configures the adapter for the mock: a custom provider "mock" (OpenAI-compatible
// chat completions at baseURL+"/v1") in Config.ConfigContent, its key read by opencode from
// APIKeyEnv, model mock/mock-model.
func newOpencode(t *testing.T, baseURL string) *opencode.Agent {
	t.Helper()
	a, err := opencode.New(opencode.Config{Image: "realcli-host", Model: "mock/" + mockmodel.ChatModel,
		APIKeyEnv: opencodeKeyEnv, APIKey: "sk-opencode-mock-not-real",
		ConfigContent: mockmodel.OpencodeProviderConfig(baseURL+"/v1", opencodeKeyEnv)})
	require.NoError(t, err)
	return a
}

// checkOpencode asserts what the adapter reads from one opencode run (live or recorded).
// session is the fresh run's session id ("" for the fresh run itself).
func checkOpencode(t *testing.T, run string, stdout []byte, m Meta, session string) *opencode.Stream {
	t.Helper()
	a := newOpencode(t, "http://127.0.0.1:1")
	s := opencode.ParseStream(stdout)
	exit := runner.ExitState{Code: m.ExitCode}
	empty := t.TempDir()
	require.Zero(t, s.Skipped, "every stdout line is a JSON event")
	switch run {
	case runFresh, runResumed:
		require.Equal(t, 0, m.ExitCode, m.Stderr)
		require.Regexp(t, opencodeSessionRE, s.SessionID)
		require.Empty(t, s.OtherSessionID, "every event carries the same sessionID")
		if run == runResumed {
			require.Equal(t, session, s.SessionID, "resumed the same session")
			require.Equal(t, session, m.Input.SessionID)
		}
		require.Empty(t, s.Errors)
		require.Equal(t, "stop", s.LastReason)
		require.Equal(t, 1, s.Steps)
		require.True(t, strings.HasPrefix(s.FinalText, mockmodel.ReplyPrefix), s.FinalText)
		require.Contains(t, s.FinalText, "MARK-ALPHA")
		if run == runResumed {
			require.Contains(t, s.FinalText, "MARK-BETA", "run 2's own mark")
		}
		require.EqualValues(t, mockmodel.InputTokens, s.InputTokens)
		require.EqualValues(t, mockmodel.OutputTokens, s.OutputTokens)
		_, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), empty)
		require.ErrorIs(t, err, phase.ErrNoResult)
		_, err = a.Result(m.Input, exit, stdout, empty)
		require.ErrorIs(t, err, phase.ErrNoResult)
		out := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(out, "result.json"), []byte(`{"summary":"s","answer":"a"}`), 0o644))
		r, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), out)
		require.NoError(t, err)
		require.Equal(t, s.SessionID, r.SessionID)
		require.EqualValues(t, mockmodel.InputTokens, r.InputTokens)
		require.EqualValues(t, mockmodel.OutputTokens, r.OutputTokens)
	case runResumeMiss:
		require.Equal(t, opencode.ResumeMissExitCode, m.ExitCode)
		require.Zero(t, s.Events, "nothing on stdout")
		require.Contains(t, m.Stderr, "Session not found")
		_, err := a.ResultStderr(m.Input, exit, stdout, []byte(m.Stderr), empty)
		require.ErrorIs(t, err, runner.ErrSessionNotFound)
		require.Contains(t, err.Error(), m.Input.SessionID)
		_, err = a.Result(m.Input, exit, stdout, empty) // without stderr: inferred from the shape
		require.ErrorIs(t, err, runner.ErrSessionNotFound)
	}
	return s
}

// TestRecordedOpencodeStreams is TestRecordedClaudeStreams for opencode: every recorded version's
// real streams, parsed again through the adapter (no npm needed).
func TestRecordedOpencodeStreams(t *testing.T) {
	versions := recordedVersions(t, opencodeTestdata)
	if len(versions) == 0 {
		t.Skipf("no %s/real_*.jsonl recorded: make realcli-test REALCLI_ARGS=-update", opencodeTestdata)
	}
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			session := ""
			for _, run := range []string{runFresh, runResumed, runResumeMiss} {
				stdout, m, ok := readRecorded(t, opencodeTestdata, v, run)
				require.True(t, ok, "%s %s recorded", v, run)
				require.Equal(t, v, m.Version)
				t.Run(run, func(t *testing.T) {
					s := checkOpencode(t, run, stdout, m, session)
					if run == runFresh {
						session = s.SessionID
					}
					golden(t, opencodeTestdata, "parse_"+recordName(v, run)+".golden.json", s)
				})
			}
		})
	}
}
