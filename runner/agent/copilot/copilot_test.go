package copilot_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/copilot"
	"github.com/alfred-bot/alfred/runner/agent/internal/clitest"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Recorded streams: testdata/stream_fresh.jsonl follows spec/agents.md §4 Output (BYOK mock);
// stream_sigterm.jsonl is the aborted stream of §4 Failure detection; usage.json has the
// --usage-output-file fields of §4 Output.

const (
	testToken = "github_pat_test_token_not_real_0123456789"
	sid       = "55555555-2222-4333-8444-555555555555"
)

var answer = phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1, Repo: "group/app", Issue: 12, Title: "Which API?"}

func newAgent(t *testing.T) *copilot.Agent {
	t.Helper()
	a, err := copilot.New(copilot.Config{Image: "alfred/copilot:1.0.102", Model: "gpt-5", APIKey: testToken})
	require.NoError(t, err)
	return a
}

func withSession(in phase.Input, resume bool) phase.Input {
	in.SessionID, in.Resume, in.SessionName = sid, resume, "agent/issue-12-which-api"
	return in
}

func outDir(t *testing.T, result string) string {
	dir := clitest.OutDir(t, result)
	require.NoError(t, os.WriteFile(filepath.Join(dir, copilot.UsageFile), clitest.Read(t, "usage.json"), 0o644))
	return dir
}

func TestCommandGolden(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	for name, in := range map[string]phase.Input{"fresh": withSession(answer, false), "resume": withSession(answer, true)} {
		inv, err := a.Command(in)
		require.NoError(t, err, name)
		for _, arg := range inv.Cmd {
			require.NotContains(t, arg, testToken, "secret in argv")
		}
		require.Contains(t, inv.Env, "COPILOT_GITHUB_TOKEN="+testToken)
		clitest.Golden(t, "command_"+name+".golden.json", inv)
	}
	byok, err := copilot.New(copilot.Config{Image: "i", BaseURL: "http://127.0.0.1:9/v1", ProviderType: "openai", APIKey: "sk-byok-secret"})
	require.NoError(t, err)
	inv, err := byok.Command(answer)
	require.NoError(t, err)
	require.Contains(t, inv.Env, "COPILOT_PROVIDER_API_KEY=sk-byok-secret")
	require.Contains(t, inv.Env, "COPILOT_OFFLINE=true", "provider only: no GitHub look-up")
	require.NotContains(t, inv.Cmd, "--session-id", "no session without an id")
}

func TestCommandRejects(t *testing.T) {
	t.Parallel()
	bad := answer
	bad.SessionID = "issue-42-x" // "not a valid UUID, so a new session cannot be created" (§4 Sessions)
	_, err := newAgent(t).Command(bad)
	require.ErrorContains(t, err, "UUID")
	_, err = copilot.New(copilot.Config{Image: "i"})
	require.Error(t, err)
}

func TestParseStreamGolden(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"stream_fresh", "stream_sigterm", "stream_session_error", "stream_result_text"} {
		clitest.Golden(t, "parse_"+name+".golden.json", copilot.ParseStream(clitest.Read(t, name+".jsonl")))
	}
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	require.Equal(t, runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  "/alfred/home/.copilot/session-state",
		CallerChosenID:    true,
		CumulativeUsage:   true,
		VersionCommand:    []string{"copilot", "--version"},
	}, a.Capabilities())
	v, err := a.ParseVersion("GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.\n")
	require.NoError(t, err)
	require.Equal(t, "1.0.102", v)
	for v, want := range map[string]bool{"1.0.102": true, "1.0.130": true, "1.0.71": false, "1.1.0": false} {
		require.Equal(t, want, a.ResumeVerified(v), v)
	}
}

func TestResult(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	out := outDir(t, `{"summary":"s","answer":"from file"}`)
	r, err := a.Result(withSession(answer, false), runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), out)
	require.NoError(t, err)
	require.Equal(t, "from file", r.Answer)
	require.Equal(t, sid, r.SessionID)
	require.EqualValues(t, 120, r.InputTokens)
	require.EqualValues(t, 9, r.OutputTokens)
	require.Zero(t, r.CostUSD, "premium requests are not dollars")

	r, err = a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_result_text.jsonl"), clitest.OutDir(t, ""))
	require.NoError(t, err)
	require.Equal(t, "Use the v2 API.", r.Answer)
	require.Zero(t, r.InputTokens, "no usage file")

	_, err = a.Result(answer, runner.ExitState{Code: 1}, clitest.Read(t, "stream_session_error.jsonl"), out)
	require.ErrorContains(t, err, "Provider returned 401")
	_, err = a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), clitest.OutDir(t, ""))
	require.ErrorIs(t, err, phase.ErrNoResult)
}

func TestResumeMiss(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	in := withSession(answer, true)
	_, err := a.ResultStderr(in, runner.ExitState{Code: 1}, nil,
		[]byte("Error: No session, task, or name matched '"+sid+"'.\n\nTry 'copilot --help'\n"), clitest.OutDir(t, ""))
	require.ErrorIs(t, err, runner.ErrSessionNotFound)
	_, err = a.Result(in, runner.ExitState{Code: 1}, nil, clitest.OutDir(t, ""))
	require.ErrorIs(t, err, runner.ErrSessionNotFound)
	_, err = a.ResultStderr(in, runner.ExitState{Code: 1}, nil, []byte("Error: No authentication information found.\n"), clitest.OutDir(t, ""))
	require.NotErrorIs(t, err, runner.ErrSessionNotFound)
}

// TestTrapExitZeroOnSIGTERM: Copilot exits 0 when Alfred stops it (§4 Failure detection). The
// adapter declares it (SIGTERMExitCode), fails on ExitState.Killed whatever the code, and fails
// an aborted stream without a result event even when nobody said it was killed.
func TestTrapExitZeroOnSIGTERM(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, copilot.SIGTERMExitCode)
	a := newAgent(t)
	out := outDir(t, `{"summary":"s","answer":"written before the kill"}`)
	_, err := a.Result(answer, runner.ExitState{Code: 0, Killed: true}, clitest.Read(t, "stream_fresh.jsonl"), out)
	require.ErrorContains(t, err, "killed")
	_, err = a.Result(answer, runner.ExitState{Code: 0}, clitest.Read(t, "stream_sigterm.jsonl"), out)
	require.ErrorContains(t, err, "no result event")
	require.ErrorContains(t, err, "aborted true")
}

// TestTrapLatestResumeNeverUsed: --continue silently starts a new session when there is none,
// and a resume uses --resume=<uuid> (which refuses unknown ids) rather than --session-id
// (which would silently create one with that id).
func TestTrapLatestResumeNeverUsed(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	inv, err := a.Command(withSession(answer, true))
	require.NoError(t, err)
	require.Contains(t, inv.Cmd, "--resume="+sid)
	require.NotContains(t, inv.Cmd, "--session-id")
	require.NotContains(t, inv.Cmd, "-n", "--name with an existing session is an error since 1.0.71")
	for _, in := range []phase.Input{answer, withSession(answer, false), withSession(answer, true)} {
		inv, err := a.Command(in)
		require.NoError(t, err)
		require.NotContains(t, inv.Cmd, "--continue")
		require.NotContains(t, inv.Cmd, "--resume")
	}
}

// TestTrapStreamSessionMismatch: the result event names another session.
func TestTrapStreamSessionMismatch(t *testing.T) {
	t.Parallel()
	in := withSession(answer, true)
	in.SessionID = "0c6f0d2e-5b7a-4f7e-8d3c-2a1b9e8f7d6c"
	_, err := newAgent(t).Result(in, runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), outDir(t, `{"summary":"s","answer":"a"}`))
	require.ErrorContains(t, err, "asked for session "+in.SessionID)
}

// TestTrapStdinClosed: the prompt is the -p argument; Copilot reads a prompt from stdin only
// without -p, and the container's stdin is closed.
func TestTrapStdinClosed(t *testing.T) {
	t.Parallel()
	inv, err := newAgent(t).Command(answer)
	require.NoError(t, err)
	i := slices.Index(inv.Cmd, "-p")
	require.GreaterOrEqual(t, i, 0)
	require.Contains(t, inv.Cmd[i+1], "Which API?")
}

// TestTrapCumulativeUsage: after a resume Copilot's usage file holds the session's totals
// (real CLI 1.0.102), so the run's share is the difference.
func TestTrapCumulativeUsage(t *testing.T) {
	t.Parallel()
	require.True(t, newAgent(t).Capabilities().CumulativeUsage)
	in, out, _ := runner.UsageDelta(phase.Result{SessionID: sid, InputTokens: 120, OutputTokens: 9},
		phase.Result{SessionID: sid, InputTokens: 240, OutputTokens: 18}, true)
	require.EqualValues(t, 120, in)
	require.EqualValues(t, 9, out)
}
