package opencode_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/internal/clitest"
	"github.com/alfred-bot/alfred/runner/agent/opencode"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Recorded streams: testdata/stream_fresh.jsonl follows spec/agents.md §3 Output (a tool step,
// then the text step with the mock's reply); the others are built from §3's event types.

const (
	testKey = "sk-ant-opencode-test-key-not-real"
	session = "ses_dd978d013ffevEdzscdyV75hDc"
)

var answer = phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1, Repo: "group/app", Issue: 12, Title: "Which API?"}

func newAgent(t *testing.T, cfg opencode.Config) *opencode.Agent {
	t.Helper()
	if cfg.Image == "" {
		cfg.Image = "alfred/opencode:1.18.33"
	}
	cfg.APIKey = testKey
	a, err := opencode.New(cfg)
	require.NoError(t, err)
	return a
}

func resumed(in phase.Input) phase.Input {
	in.SessionID, in.Resume = session, true
	return in
}

func TestCommandGolden(t *testing.T) {
	t.Parallel()
	a := newAgent(t, opencode.Config{Model: "anthropic/claude-sonnet-4-5", ConfigContent: `{"agent":{"build":{"steps":50}}}`})
	fresh := answer
	fresh.SessionName = "agent/issue-12-which-api"
	for name, in := range map[string]phase.Input{"fresh": fresh, "resume": resumed(fresh)} {
		inv, err := a.Command(in)
		require.NoError(t, err, name)
		for _, arg := range inv.Cmd {
			require.NotContains(t, arg, testKey, "secret in argv")
		}
		require.Contains(t, inv.Env, "ANTHROPIC_API_KEY="+testKey)
		require.Contains(t, inv.Env, "OPENCODE_DB=/alfred/home/.opencode-sessions/opencode.db")
		clitest.Golden(t, "command_"+name+".golden.json", inv)
	}
	inv, err := newAgent(t, opencode.Config{APIKeyEnv: "OPENAI_API_KEY"}).Command(answer)
	require.NoError(t, err)
	require.Contains(t, inv.Env, "OPENAI_API_KEY="+testKey)
	// No session (SessionName ""): no session mount, so no OPENCODE_DB in a missing directory.
	for _, e := range inv.Env {
		require.NotContains(t, e, "OPENCODE_DB=", "run without a session")
	}
}

func TestCommandRejects(t *testing.T) {
	t.Parallel()
	a := newAgent(t, opencode.Config{})
	bad := answer
	bad.SessionID, bad.Resume = "0c6f0d2e-5b7a-4f7e-8d3c-2a1b9e8f7d6c", true
	_, err := a.Command(bad)
	require.ErrorContains(t, err, "ses_")
	_, err = opencode.New(opencode.Config{Image: "x"})
	require.Error(t, err)
}

func TestParseStreamGolden(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"stream_fresh", "stream_resumed", "stream_error", "stream_result_text"} {
		clitest.Golden(t, "parse_"+name+".golden.json", opencode.ParseStream(clitest.Read(t, name+".jsonl")))
	}
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	a := newAgent(t, opencode.Config{})
	require.Equal(t, runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  "/alfred/home/.opencode-sessions",
		VersionCommand:    []string{"opencode", "--version"},
	}, a.Capabilities())
	v, err := a.ParseVersion("1.18.33\n")
	require.NoError(t, err)
	require.Equal(t, "1.18.33", v)
	for v, want := range map[string]bool{"1.18.33": true, "1.18.40": true, "1.18.32": false, "1.19.0": false, "1.1.9": false} {
		require.Equal(t, want, a.ResumeVerified(v), v)
	}
}

func TestResult(t *testing.T) {
	t.Parallel()
	a := newAgent(t, opencode.Config{})
	out := clitest.OutDir(t, `{"summary":"s","answer":"from file"}`)
	r, err := a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), out)
	require.NoError(t, err)
	require.Equal(t, "from file", r.Answer)
	require.Equal(t, session, r.SessionID)
	require.EqualValues(t, 220, r.InputTokens, "summed over both steps")
	require.EqualValues(t, 19, r.OutputTokens)
	require.InDelta(t, 0.0004, r.CostUSD, 1e-12)

	r, err = a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_result_text.jsonl"), clitest.OutDir(t, ""))
	require.NoError(t, err)
	require.Equal(t, "Use the v2 API.", r.Answer, "text of the last step, chunks joined")
	require.EqualValues(t, 1000, r.InputTokens)
	require.EqualValues(t, 80, r.OutputTokens)
	require.InDelta(t, 0.003, r.CostUSD, 1e-12)

	_, err = a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), clitest.OutDir(t, ""))
	require.ErrorIs(t, err, phase.ErrNoResult)
	_, err = a.Result(answer, runner.ExitState{Code: 1}, clitest.Read(t, "stream_error.jsonl"), out)
	require.ErrorContains(t, err, "401 invalid x-api-key")
	_, err = a.Result(answer, runner.ExitState{}, nil, out)
	require.ErrorContains(t, err, "run failed")
}

func TestResumeMiss(t *testing.T) {
	t.Parallel()
	a := newAgent(t, opencode.Config{})
	in := resumed(answer)
	_, err := a.ResultStderr(in, runner.ExitState{Code: 1}, nil, []byte("\x1b[91m\x1b[1mError: \x1b[0mSession not found\n"), clitest.OutDir(t, ""))
	require.ErrorIs(t, err, runner.ErrSessionNotFound)
	require.ErrorContains(t, err, "Error: Session not found")
	_, err = a.Result(in, runner.ExitState{Code: 1}, nil, clitest.OutDir(t, ""))
	require.ErrorIs(t, err, runner.ErrSessionNotFound)
	_, err = a.Result(in, runner.ExitState{Code: 1}, clitest.Read(t, "stream_error.jsonl"), clitest.OutDir(t, ""))
	require.NotErrorIs(t, err, runner.ErrSessionNotFound, "an API error after the session loaded")
}

// TestTrapLatestResumeNeverUsed: --continue silently creates a session when there is none
// (§3 Sessions), so only --session <id> is used.
func TestTrapLatestResumeNeverUsed(t *testing.T) {
	t.Parallel()
	for _, in := range []phase.Input{answer, resumed(answer)} {
		inv, err := newAgent(t, opencode.Config{}).Command(in)
		require.NoError(t, err)
		require.NotContains(t, inv.Cmd, "--continue")
		require.NotContains(t, inv.Cmd, "-c")
		require.NotContains(t, inv.Cmd, "--fork")
	}
}

// TestTrapStreamSessionMismatch: the resumed run reports another session.
func TestTrapStreamSessionMismatch(t *testing.T) {
	t.Parallel()
	_, err := newAgent(t, opencode.Config{}).Result(resumed(answer), runner.ExitState{},
		clitest.Read(t, "stream_other_session.jsonl"), clitest.OutDir(t, `{"summary":"s","answer":"a"}`))
	require.ErrorContains(t, err, "asked for session "+session)
}

// TestTrapStdinClosed: the message is the last positional argument; opencode would combine a
// non-TTY stdin with it (§3 Invocation), and the container's stdin is closed.
func TestTrapStdinClosed(t *testing.T) {
	t.Parallel()
	inv, err := newAgent(t, opencode.Config{}).Command(answer)
	require.NoError(t, err)
	require.Contains(t, inv.Cmd[len(inv.Cmd)-1], "Which API?")
	require.False(t, slices.Contains(inv.Cmd, "-"))
}

// TestTrapCumulativeUsage: opencode's step_finish counts are per run, so runner.UsageDelta
// keeps them as they are.
func TestTrapCumulativeUsage(t *testing.T) {
	t.Parallel()
	a := newAgent(t, opencode.Config{})
	require.False(t, a.Capabilities().CumulativeUsage)
	r2, err := a.Result(resumed(answer), runner.ExitState{}, clitest.Read(t, "stream_resumed.jsonl"), clitest.OutDir(t, `{"summary":"s","answer":"a"}`))
	require.NoError(t, err)
	in, out, _ := runner.UsageDelta(phase.Result{SessionID: session, InputTokens: 220, OutputTokens: 19}, *r2, false)
	require.EqualValues(t, 120, in)
	require.EqualValues(t, 9, out)
}

// TestTrapExitCodeOnSIGTERM: opencode exits 143 on SIGTERM (§3 Failure detection).
func TestTrapExitCodeOnSIGTERM(t *testing.T) {
	t.Parallel()
	require.Equal(t, 143, opencode.SIGTERMExitCode)
	_, err := newAgent(t, opencode.Config{}).Result(answer, runner.ExitState{Code: 143, Killed: true},
		clitest.Read(t, "stream_fresh.jsonl"), clitest.OutDir(t, `{"summary":"s","answer":"a"}`))
	require.ErrorContains(t, err, "killed")
}

// A resumed run that succeeded is no refused resume, even when its stderr holds the words
// opencode prints for one (an MCP server's "Session not found"): its result and cost count.
func TestASuccessWithTheRefusalInStderrIsNoRefusedResume(t *testing.T) {
	t.Parallel()
	a, err := opencode.New(opencode.Config{Image: "i", APIKey: "k"})
	require.NoError(t, err)
	sid := "ses_dd978d013ffevEdzscdyV75hDc"
	in := phase.Input{Phase: phase.Answer, Key: "answer", SessionID: sid, Resume: true}
	stdout := `{"type":"step_start","sessionID":"` + sid + `","part":{}}
{"type":"text","sessionID":"` + sid + `","part":{"text":"{\"summary\":\"s\",\"answer\":\"a\"}"}}
{"type":"step_finish","sessionID":"` + sid + `","part":{"reason":"stop","tokens":{"input":100000,"output":900},"cost":1.25}}
`
	res, err := a.ResultStderr(in, runner.ExitState{Code: 0}, []byte(stdout), []byte("mcp: Session not found\n"), t.TempDir())
	require.NoError(t, err)
	require.False(t, errors.Is(err, runner.ErrSessionNotFound))
	require.Equal(t, "a", res.Answer)
	require.Equal(t, 1.25, res.CostUSD)
}
