package codex_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/codex"
	"github.com/alfred-bot/alfred/runner/agent/internal/clitest"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Recorded streams: testdata/stream_fresh.jsonl is spec/agents.md §2 Output verbatim;
// stream_resumed.jsonl is the same thread after `exec resume`, with the cumulative usage
// observed there (120 → 240); the others are built from §2's event types.

const (
	testKey = "sk-codex-test-key-not-real"
	thread  = "01a22686-6c02-7b90-a757-73a44775167c"
)

var answer = phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1, Repo: "group/app", Issue: 12, Title: "Which API?"}

func newAgent(t *testing.T, cfg codex.Config) *codex.Agent {
	t.Helper()
	if cfg.Image == "" {
		cfg.Image = "alfred/codex:0.171.0"
	}
	cfg.APIKey = testKey
	a, err := codex.New(cfg)
	require.NoError(t, err)
	return a
}

func resumed(in phase.Input) phase.Input {
	in.SessionID, in.Resume = thread, true
	return in
}

func TestCommandGolden(t *testing.T) {
	t.Parallel()
	a := newAgent(t, codex.Config{Model: "gpt-5.1-codex"})
	dev := phase.Input{Phase: phase.Development, Key: "development", Attempt: 1, Repo: "group/app", Issue: 12,
		Title: "Login with SSO", Plan: "1. Add OIDC client.", Model: "gpt-5.1", SessionName: "agent/issue-12-login-with-sso"}
	for name, in := range map[string]phase.Input{"fresh": answer, "resume": resumed(dev)} {
		inv, err := a.Command(in)
		require.NoError(t, err, name)
		clitest.Golden(t, "command_"+name+".golden.json", inv)
	}
	inv, err := newAgent(t, codex.Config{BaseURL: "http://127.0.0.1:8080/v1"}).Command(answer)
	require.NoError(t, err)
	clitest.Golden(t, "command_base_url.golden.json", inv)
	for _, arg := range inv.Cmd {
		require.NotContains(t, arg, testKey, "secret in argv")
	}
	require.Equal(t, []string{"CODEX_API_KEY=" + testKey}, inv.Env)
}

func TestCommandRejects(t *testing.T) {
	t.Parallel()
	a := newAgent(t, codex.Config{})
	bad := answer
	bad.SessionID, bad.Resume = "my-thread-name", true // a name could silently start a new thread
	_, err := a.Command(bad)
	require.ErrorContains(t, err, "UUID")
	_, err = a.Command(phase.Input{Phase: "bogus", Key: "bogus"})
	require.Error(t, err)
	_, err = codex.New(codex.Config{Image: "x"})
	require.Error(t, err)
}

func TestParseStreamGolden(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"stream_fresh", "stream_resumed", "stream_failed", "stream_result_text"} {
		clitest.Golden(t, "parse_"+name+".golden.json", codex.ParseStream(clitest.Read(t, name+".jsonl")))
	}
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	a := newAgent(t, codex.Config{VerifiedVersions: []string{"0.172.3"}})
	require.Equal(t, runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  "/alfred/home/.codex/sessions",
		CumulativeUsage:   true,
		VersionCommand:    []string{"codex", "--version"},
	}, a.Capabilities())
	v, err := a.ParseVersion("codex-cli 0.171.0\n")
	require.NoError(t, err)
	require.Equal(t, "0.171.0", v)
	for v, want := range map[string]bool{"0.171.0": true, "0.171.4": true, "0.172.3": true, "0.172.0": false, "0.170.9": false, "1.0.0": false} {
		require.Equal(t, want, a.ResumeVerified(v), v)
	}
}

func TestResult(t *testing.T) {
	t.Parallel()
	a := newAgent(t, codex.Config{})
	out := clitest.OutDir(t, `{"summary":"s","answer":"from file"}`)

	r, err := a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), out)
	require.NoError(t, err)
	require.Equal(t, "from file", r.Answer)
	require.Equal(t, thread, r.SessionID)
	require.EqualValues(t, 120, r.InputTokens)
	require.EqualValues(t, 9, r.OutputTokens)
	require.Zero(t, r.CostUSD, "Codex reports no cost")

	// The final agent_message is the fallback result.
	r, err = a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_result_text.jsonl"), clitest.OutDir(t, ""))
	require.NoError(t, err)
	require.Equal(t, "Use the v2 API.", r.Answer)
	require.EqualValues(t, 1000, r.InputTokens)

	_, err = a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), clitest.OutDir(t, ""))
	require.ErrorIs(t, err, phase.ErrNoResult)
	_, err = a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), clitest.OutDir(t, `{"summary":""}`))
	require.ErrorIs(t, err, phase.ErrInvalidResult)

	_, err = a.Result(answer, runner.ExitState{Code: 1}, clitest.Read(t, "stream_failed.jsonl"), out)
	require.ErrorContains(t, err, "401 Unauthorized")
	_, err = a.Result(answer, runner.ExitState{Code: 1}, nil, out)
	require.ErrorContains(t, err, "run failed")
	require.NotErrorIs(t, err, runner.ErrSessionNotFound, "a fresh run cannot miss a session")
}

func TestResumeMiss(t *testing.T) {
	t.Parallel()
	a := newAgent(t, codex.Config{})
	in := resumed(answer)
	stderr := []byte("Error: thread/resume: thread/resume failed: no rollout found for thread id " + thread + " (code -32600)\nstack backtrace:\n")
	_, err := a.ResultStderr(in, runner.ExitState{Code: 1}, nil, stderr, clitest.OutDir(t, ""))
	require.ErrorIs(t, err, runner.ErrSessionNotFound)
	require.ErrorContains(t, err, "no rollout found")

	// Without stderr, the shape (exit 1, nothing on stdout) is enough.
	_, err = a.Result(in, runner.ExitState{Code: 1}, nil, clitest.OutDir(t, ""))
	require.ErrorIs(t, err, runner.ErrSessionNotFound)

	// Another failure reported on stderr is not a miss.
	_, err = a.ResultStderr(in, runner.ExitState{Code: 1}, nil, []byte("Error: unauthorized\n"), clitest.OutDir(t, ""))
	require.Error(t, err)
	require.NotErrorIs(t, err, runner.ErrSessionNotFound)
}

// TestTrapLatestResumeNeverUsed: `resume --last` and resume by name start a new thread with
// exit 0 when nothing matches (§2 Failure detection), so neither is ever emitted.
func TestTrapLatestResumeNeverUsed(t *testing.T) {
	t.Parallel()
	a := newAgent(t, codex.Config{})
	for _, in := range []phase.Input{answer, resumed(answer)} {
		inv, err := a.Command(in)
		require.NoError(t, err)
		for _, bad := range []string{"--last", "--all", "latest"} {
			require.NotContains(t, inv.Cmd, bad)
		}
	}
}

// TestTrapStreamSessionMismatch: a resume that Codex turned into a new thread (exit 0).
func TestTrapStreamSessionMismatch(t *testing.T) {
	t.Parallel()
	_, err := newAgent(t, codex.Config{}).Result(resumed(answer), runner.ExitState{},
		clitest.Read(t, "stream_new_thread.jsonl"), clitest.OutDir(t, `{"summary":"s","answer":"a"}`))
	require.ErrorContains(t, err, "asked for session "+thread)
	require.NotErrorIs(t, err, runner.ErrSessionNotFound)
}

// TestTrapStdinClosed: the prompt is the last argument; stdin ("-" or no argument) is never
// used, since the container's stdin is closed and Codex would wait or append it.
func TestTrapStdinClosed(t *testing.T) {
	t.Parallel()
	for _, in := range []phase.Input{answer, resumed(answer)} {
		inv, err := newAgent(t, codex.Config{}).Command(in)
		require.NoError(t, err)
		require.Contains(t, inv.Cmd[len(inv.Cmd)-1], "Which API?")
		require.False(t, slices.Contains(inv.Cmd, "-"))
	}
}

// TestTrapCumulativeUsage: turn.completed.usage is the thread's total after a resume.
func TestTrapCumulativeUsage(t *testing.T) {
	t.Parallel()
	a := newAgent(t, codex.Config{})
	out := clitest.OutDir(t, `{"summary":"s","answer":"a"}`)
	r1, err := a.Result(answer, runner.ExitState{}, clitest.Read(t, "stream_fresh.jsonl"), out)
	require.NoError(t, err)
	r2, err := a.Result(resumed(answer), runner.ExitState{}, clitest.Read(t, "stream_resumed.jsonl"), out)
	require.NoError(t, err)
	in, o, cost := runner.UsageDelta(*r1, *r2, a.Capabilities().CumulativeUsage)
	require.EqualValues(t, 120, in)
	require.EqualValues(t, 9, o)
	require.Zero(t, cost)
}

// TestTrapExitCodeOnSIGTERM: Codex exits 143 on SIGTERM (§2 Failure detection); killed runs fail.
func TestTrapExitCodeOnSIGTERM(t *testing.T) {
	t.Parallel()
	require.Equal(t, 143, codex.SIGTERMExitCode)
	_, err := newAgent(t, codex.Config{}).Result(answer, runner.ExitState{Code: 143, Killed: true},
		clitest.Read(t, "stream_fresh.jsonl"), clitest.OutDir(t, `{"summary":"s","answer":"a"}`))
	require.ErrorContains(t, err, "killed")
}
