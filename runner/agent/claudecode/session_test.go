package claudecode_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/claudecode"
	"github.com/alfred-bot/alfred/runner/phase"
)

const sid = "0c6f0d2e-5b7a-4f7e-8d3c-2a1b9e8f7d6c"

func TestCapabilities(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	require.Equal(t, runner.Capabilities{
		ResumableSessions: true,
		SessionStatePath:  "/alfred/home/.claude/projects/-workspace",
		CallerChosenID:    true,
		CumulativeUsage:   true,
		VersionCommand:    []string{"claude", "--version"},
	}, a.Capabilities())

	v, err := a.ParseVersion("2.1.332 (Claude Code)\n")
	require.NoError(t, err)
	require.Equal(t, "2.1.332", v)
	_, err = a.ParseVersion("command not found")
	require.Error(t, err)

	for v, want := range map[string]bool{
		"2.1.332": true, "2.1.400": true, // tested line, from the tested patch on
		"2.1.331": false, "2.1.197": false, "2.2.0": false, "3.0.0": false, "1.0.128": false,
		"2.1.332-beta": false, "": false,
	} {
		require.Equal(t, want, a.ResumeVerified(v), v)
	}
	b, err := claudecode.New(claudecode.Config{Image: "i", APIKey: "k", VerifiedVersions: []string{"2.2.1"}})
	require.NoError(t, err)
	require.True(t, b.ResumeVerified("2.2.1"))
	require.False(t, b.ResumeVerified("2.2.2"))
}

func TestCommandSessionFlags(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	fresh := phase.Input{Phase: phase.Answer, Key: "answer", SessionID: sid, SessionName: "agent/issue-12-sso"}
	inv, err := a.Command(fresh)
	require.NoError(t, err)
	require.Equal(t, []string{"--session-id", sid, "-n", "agent/issue-12-sso"}, inv.Cmd[len(inv.Cmd)-4:])

	resume := fresh
	resume.Resume = true
	inv, err = a.Command(resume)
	require.NoError(t, err)
	require.Equal(t, []string{"--resume", sid}, inv.Cmd[len(inv.Cmd)-2:])
	require.NotContains(t, inv.Cmd, "-n", "the name is set once, at creation")
}

// TestTrapLatestResumeNeverUsed: -c/--continue silently starts a new session in an empty dir
// (spec/agents.md §1 Sessions), so it is never emitted.
func TestTrapLatestResumeNeverUsed(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	for _, in := range []phase.Input{
		{Phase: phase.Answer, Key: "answer"},
		{Phase: phase.Answer, Key: "answer", SessionID: sid},
		{Phase: phase.Answer, Key: "answer", SessionID: sid, Resume: true},
	} {
		inv, err := a.Command(in)
		require.NoError(t, err)
		for _, bad := range []string{"-c", "--continue", "latest"} {
			require.NotContains(t, inv.Cmd, bad)
		}
	}
}

// TestTrapStreamSessionMismatch: a run asked for one session and the stream reports another.
func TestTrapStreamSessionMismatch(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	out := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(out, phase.ResultFile), []byte(`{"summary":"s","answer":"a"}`), 0o644))
	for _, resume := range []bool{false, true} {
		in := phase.Input{Phase: phase.Answer, Key: "answer", SessionID: sid, Resume: resume}
		_, err := a.Result(in, runner.ExitState{}, readStream(t, "stream_success"), out) // session 4444…
		require.ErrorContains(t, err, "asked for session "+sid)
		require.NotErrorIs(t, err, runner.ErrSessionNotFound)
	}
}

// TestTrapStdinClosed: the container's stdin is closed (no OpenStdin), so the prompt must be an
// argument, never "-" or absent.
func TestTrapStdinClosed(t *testing.T) {
	t.Parallel()
	inv, err := newAgent(t).Command(phase.Input{Phase: phase.Answer, Key: "answer", Title: "Why?"})
	require.NoError(t, err)
	i := slices.Index(inv.Cmd, "-p")
	require.GreaterOrEqual(t, i, 0)
	require.Contains(t, inv.Cmd[i+1], "Why?")
	require.NotContains(t, inv.Cmd, "-")
}

// TestTrapCumulativeUsage: after --resume, total_cost_usd and modelUsage are session totals
// while result.usage is this run only (§1 Output). The adapter reports session totals
// consistently; runner.UsageDelta recovers this run's share. The resumed stream is synthesized
// from the numbers observed in spec/agents.md §1 Output (120 tokens and 0.000495 USD per call, 2× after one resume).
func TestTrapCumulativeUsage(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	out := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(out, phase.ResultFile), []byte(`{"summary":"s","answer":"a"}`), 0o644))
	in := phase.Input{Phase: phase.Answer, Key: "answer", SessionID: sid, Resume: true}
	r2, err := a.Result(in, runner.ExitState{}, readStream(t, "stream_resumed"), out)
	require.NoError(t, err)
	require.EqualValues(t, 240, r2.InputTokens)
	require.EqualValues(t, 18, r2.OutputTokens)
	require.InDelta(t, 0.00099, r2.CostUSD, 1e-12)

	r1 := phase.Result{SessionID: sid, InputTokens: 120, OutputTokens: 9, CostUSD: 0.000495}
	din, dout, dcost := runner.UsageDelta(r1, *r2, a.Capabilities().CumulativeUsage)
	require.EqualValues(t, 120, din)
	require.EqualValues(t, 9, dout)
	require.InDelta(t, 0.000495, dcost, 1e-12)
}

// TestTrapExitCodeOnSIGTERM: Claude Code exits 143 on SIGTERM (§1 Failure detection); a run
// Alfred stopped is a failure whatever the stream says.
func TestTrapExitCodeOnSIGTERM(t *testing.T) {
	t.Parallel()
	require.Equal(t, 143, claudecode.SIGTERMExitCode)
	_, err := newAgent(t).Result(phase.Input{Phase: phase.Answer, Key: "answer"},
		runner.ExitState{Code: 0, Killed: true}, readStream(t, "stream_success"), t.TempDir())
	require.ErrorContains(t, err, "killed")
}

func TestResumeMissFromStderr(t *testing.T) {
	t.Parallel()
	in := phase.Input{Phase: phase.Answer, Key: "answer", SessionID: sid, Resume: true}
	// Text or json output formats put the miss only on stderr (§1 Failure detection).
	_, err := newAgent(t).ResultStderr(in, runner.ExitState{Code: 1}, nil,
		[]byte("No conversation found with session ID: "+sid+"\n"), t.TempDir())
	require.ErrorIs(t, err, runner.ErrSessionNotFound)
}

// A run that succeeded is no refused resume, even when the model's answer quotes the message
// Claude Code prints for one: the result is read, the session kept, the run's cost counted.
func TestASuccessQuotingTheRefusalIsNoRefusedResume(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	final := `{"summary":"s","answer":"Claude prints No conversation found with session ID when the id is unknown."}`
	stdout := fmt.Sprintf(`{"type":"system","subtype":"init","session_id":"%s"}
{"type":"result","subtype":"success","is_error":false,"result":%q,"session_id":"%s","total_cost_usd":1.5,"usage":{"input_tokens":1000,"output_tokens":500}}
`, sid, final, sid)
	for _, resume := range []bool{true, false} {
		in := phase.Input{Phase: phase.Answer, Key: "answer", SessionID: sid, Resume: resume}
		res, err := a.ResultStderr(in, runner.ExitState{Code: 0}, []byte(stdout), nil, t.TempDir())
		require.NoError(t, err, "resume %t", resume)
		require.False(t, errors.Is(err, runner.ErrSessionNotFound))
		require.Contains(t, res.Answer, "No conversation found")
		require.Equal(t, 1.5, res.CostUSD)
	}
}
