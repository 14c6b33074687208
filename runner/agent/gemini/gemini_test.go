package gemini_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/gemini"
	"github.com/alfred-bot/alfred/runner/agent/internal/clitest"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Recorded streams: testdata/stream_fresh.jsonl is spec/agents.md §5 Output (mock model); the
// others are built from §5's event types.

const (
	testKey = "AIza-gemini-test-key-not-real"
	sid     = "66666666-2222-4333-8444-555555555555"
)

var answer = phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1, Repo: "group/app", Issue: 12, Title: "Which API?"}

func newAgent(t *testing.T) *gemini.Agent {
	t.Helper()
	a, err := gemini.New(gemini.Config{Image: "alfred/gemini:0.61.0", Model: "gemini-2.5-flash", APIKey: testKey})
	require.NoError(t, err)
	return a
}

func withSession(in phase.Input, resume bool) phase.Input {
	in.SessionID, in.Resume, in.SessionName = sid, resume, "agent/issue-12-which-api"
	return in
}

func TestCommandGolden(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	for name, in := range map[string]phase.Input{"fresh": withSession(answer, false), "resume": withSession(answer, true)} {
		inv, err := a.Command(in)
		require.NoError(t, err, name)
		for _, arg := range inv.Cmd {
			require.NotContains(t, arg, testKey, "secret in argv")
		}
		require.Equal(t, []string{"GEMINI_API_KEY=" + testKey}, inv.Env)
		clitest.Golden(t, "command_"+name+".golden.json", inv)
	}
}

func TestCommandRejects(t *testing.T) {
	t.Parallel()
	bad := answer
	bad.SessionID, bad.Resume = "latest", true
	_, err := newAgent(t).Command(bad)
	require.ErrorContains(t, err, "UUID")
	_, err = gemini.New(gemini.Config{Image: "i"})
	require.Error(t, err)
}

func TestParseStreamGolden(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"stream_fresh", "stream_error", "stream_result_text"} {
		clitest.Golden(t, "parse_"+name+".golden.json", gemini.ParseStream(clitest.Read(t, name+".jsonl")))
	}
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	require.Equal(t, runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  "/alfred/home/.gemini/tmp/workspace/chats",
		CallerChosenID:    true,
		VersionCommand:    []string{"gemini", "--version"},
	}, a.Capabilities())
	v, err := a.ParseVersion("0.61.0\n")
	require.NoError(t, err)
	require.Equal(t, "0.61.0", v)
	for v, want := range map[string]bool{"0.61.0": true, "0.61.2": true, "0.60.9": false, "0.62.0": false} {
		require.Equal(t, want, a.ResumeVerified(v), v)
	}
}

func TestResult(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	out := clitest.OutDir(t, `{"summary":"s","answer":"from file"}`)
	r, err := a.Result(withSession(answer, false), runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), out)
	require.NoError(t, err)
	require.Equal(t, "from file", r.Answer)
	require.Equal(t, sid, r.SessionID)
	require.EqualValues(t, 120, r.InputTokens)
	require.EqualValues(t, 9, r.OutputTokens)
	require.Zero(t, r.CostUSD)

	r, err = a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_result_text.jsonl"), clitest.OutDir(t, ""))
	require.NoError(t, err)
	require.Equal(t, "Use the v2 API.", r.Answer, "chunks after the last tool call")

	_, err = a.Result(answer, runner.ExitState{Code: 53}, clitest.Read(t, "stream_error.jsonl"), out)
	require.ErrorContains(t, err, "turn limit")
	_, err = a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_error.jsonl"), out)
	require.ErrorContains(t, err, "Reached max session turns")
	_, err = a.ResultStderr(answer, runner.ExitState{Code: 55}, nil, []byte("Gemini CLI is not running in a trusted directory.\n"), out)
	require.ErrorContains(t, err, "untrusted workspace")
	_, err = a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), clitest.OutDir(t, ""))
	require.ErrorIs(t, err, phase.ErrNoResult)
}

func TestResumeMiss(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	in := withSession(answer, true)
	stderr := []byte(`Error resuming session: Invalid session identifier "` + sid + `". Searched for sessions in /alfred/home/.gemini/tmp/workspace/chats.` + "\n")
	_, err := a.ResultStderr(in, runner.ExitState{Code: 42}, nil, stderr, clitest.OutDir(t, ""))
	require.ErrorIs(t, err, runner.ErrSessionNotFound)
	_, err = a.Result(in, runner.ExitState{Code: 42}, nil, clitest.OutDir(t, ""))
	require.ErrorIs(t, err, runner.ErrSessionNotFound)
	// 42 is any input error: "already exists" on a fresh run is not a miss.
	_, err = a.ResultStderr(withSession(answer, false), runner.ExitState{Code: 42}, nil,
		[]byte(`Error starting session: Session ID "`+sid+`" already exists. Use --resume to resume it.`), clitest.OutDir(t, ""))
	require.NotErrorIs(t, err, runner.ErrSessionNotFound)
}

// TestTrapLatestResumeNeverUsed: `--resume latest` silently starts a new session in a project
// without sessions (§5 Sessions); only exact UUIDs are passed.
func TestTrapLatestResumeNeverUsed(t *testing.T) {
	t.Parallel()
	for _, in := range []phase.Input{answer, withSession(answer, false), withSession(answer, true)} {
		inv, err := newAgent(t).Command(in)
		require.NoError(t, err)
		require.NotContains(t, inv.Cmd, "latest")
		require.NotContains(t, inv.Cmd, "-r")
	}
}

// TestTrapStreamSessionMismatch: init reports another session than the one asked for.
func TestTrapStreamSessionMismatch(t *testing.T) {
	t.Parallel()
	for _, resume := range []bool{false, true} {
		_, err := newAgent(t).Result(withSession(answer, resume), runner.ExitState{},
			clitest.Read(t, "stream_other_session.jsonl"), clitest.OutDir(t, `{"summary":"s","answer":"a"}`))
		require.ErrorContains(t, err, "asked for session "+sid)
	}
}

// TestTrapStdinClosed: the prompt is the -p argument (Gemini appends -p to piped stdin).
func TestTrapStdinClosed(t *testing.T) {
	t.Parallel()
	inv, err := newAgent(t).Command(answer)
	require.NoError(t, err)
	i := slices.Index(inv.Cmd, "-p")
	require.GreaterOrEqual(t, i, 0)
	require.Contains(t, inv.Cmd[i+1], "Which API?")
}

// TestTrapExitCodeOnSIGTERM: Gemini exits 1 on SIGTERM (§5 [obs]), the code of any error.
func TestTrapExitCodeOnSIGTERM(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1, gemini.SIGTERMExitCode)
	_, err := newAgent(t).Result(answer, runner.ExitState{Code: 1, Killed: true}, clitest.Read(t, "stream_fresh.jsonl"), clitest.OutDir(t, `{"summary":"s","answer":"a"}`))
	require.ErrorContains(t, err, "killed")
}

// TestTrapCumulativeUsage: Gemini's result.stats are treated as per run.
func TestTrapCumulativeUsage(t *testing.T) {
	t.Parallel()
	require.False(t, newAgent(t).Capabilities().CumulativeUsage)
}
