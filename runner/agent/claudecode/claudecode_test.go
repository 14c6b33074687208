package claudecode_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/claudecode"
	"github.com/alfred-bot/alfred/runner/phase"
)

var update = flag.Bool("update", false, "rewrite golden files")

const testKey = "sk-ant-test-key-not-real"

func golden(t *testing.T, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	got = append(got, '\n')
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

func newAgent(t *testing.T) *claudecode.Agent {
	t.Helper()
	a, err := claudecode.New(claudecode.Config{Image: "alfred/claude-code:2.1.332", Model: "sonnet", MaxTurns: 40, APIKey: testKey})
	require.NoError(t, err)
	return a
}

func TestCommandGolden(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	for name, in := range map[string]phase.Input{
		"functional": {Phase: phase.Analysis, Step: phase.StepFunctional, Key: "analysis.functional", Attempt: 1,
			Repo: "group/app", Issue: 12, Title: "Login with SSO", Description: "Users want to log in with the company SSO.",
			SessionID: "0c6f0d2e-5b7a-4f7e-8d3c-2a1b9e8f7d6c"},
		"development": {Phase: phase.Development, Key: "development", Attempt: 1, Repo: "group/app", Issue: 12,
			Title: "Login with SSO", Description: "Users want SSO.", Decisions: map[string]string{"q1": "GitLab"},
			Analysis: "SSO via OIDC.", Plan: "1. Add OIDC client.", Model: "opus", Branch: "agent/issue-12-login-with-sso",
			SessionID: "0c6f0d2e-5b7a-4f7e-8d3c-2a1b9e8f7d6c", Resume: true},
		"ci_fix": {Phase: phase.CIFix, Key: "ci_fix", Attempt: 2, Repo: "group/app", Issue: 12, Title: "Login with SSO",
			CILog: "--- FAIL: TestLogin (0.01s)\n    login_test.go:12: got 500"},
	} {
		inv, err := a.Command(in)
		require.NoError(t, err, name)
		for _, arg := range inv.Cmd {
			require.NotContains(t, arg, testKey, "secret in argv")
		}
		require.Contains(t, inv.Env, "ANTHROPIC_API_KEY="+testKey)
		golden(t, "command_"+name+".golden.json", inv)
	}
}

func TestCommandRejects(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	_, err := a.Command(phase.Input{Phase: phase.Answer, Key: "answer", SessionID: "not-a-uuid"})
	require.Error(t, err)
	_, err = a.Command(phase.Input{Phase: "bogus", Key: "bogus"})
	require.Error(t, err)
	_, err = claudecode.New(claudecode.Config{Image: "x"})
	require.Error(t, err)
}

func TestLongPromptPointsToInputFile(t *testing.T) {
	t.Parallel()
	in := phase.Input{Phase: phase.CIFix, Key: "ci_fix", Attempt: 1, Title: "t",
		CILog: strings.Repeat("log line\n", 20000)}
	p, err := claudecode.Prompt(in)
	require.NoError(t, err)
	require.LessOrEqual(t, len(p), claudecode.MaxPromptBytes)
	require.Contains(t, p, "/alfred/in/input.json")
	require.NotContains(t, p, "log line")
}

func TestParseStreamGolden(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"stream_success", "stream_resume_miss", "stream_max_turns", "stream_result_text"} {
		data, err := os.ReadFile(filepath.Join("testdata", name+".jsonl"))
		require.NoError(t, err)
		golden(t, "parse_"+name+".golden.json", claudecode.ParseStream(data))
	}
}

func readStream(t *testing.T, name string) []byte {
	data, err := os.ReadFile(filepath.Join("testdata", name+".jsonl"))
	require.NoError(t, err)
	return data
}

func TestResult(t *testing.T) {
	t.Parallel()
	a := newAgent(t)
	answer := phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1}

	// result.json written by the agent wins; stream fills session and usage.
	out := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(out, phase.ResultFile), []byte(`{"summary":"s","answer":"from file"}`), 0o644))
	r, err := a.Result(answer, runner.ExitState{}, readStream(t, "stream_success"), out)
	require.NoError(t, err)
	require.Equal(t, "from file", r.Answer)
	require.Equal(t, "44444444-2222-4333-8444-555555555555", r.SessionID)
	require.EqualValues(t, 120, r.InputTokens)
	require.EqualValues(t, 9, r.OutputTokens)
	require.InDelta(t, 0.000495, r.CostUSD, 1e-9)

	// No file, but the final text is a contract object (in a fence).
	r, err = a.Result(answer, runner.ExitState{}, readStream(t, "stream_result_text"), t.TempDir())
	require.NoError(t, err)
	require.Equal(t, "Use the v2 API.", r.Answer)
	require.EqualValues(t, 1000, r.InputTokens)

	// No file and plain text: no result.
	_, err = a.Result(answer, runner.ExitState{}, readStream(t, "stream_success"), t.TempDir())
	require.ErrorIs(t, err, phase.ErrNoResult)

	// Resume miss is typed.
	resume := answer
	resume.SessionID, resume.Resume = "0c6f0d2e-5b7a-4f7e-8d3c-2a1b9e8f7d6c", true
	_, err = a.Result(resume, runner.ExitState{Code: 1}, readStream(t, "stream_resume_miss"), t.TempDir())
	require.ErrorIs(t, err, runner.ErrSessionNotFound)
	var snf *claudecode.SessionNotFoundError
	require.ErrorAs(t, err, &snf)
	require.Equal(t, resume.SessionID, snf.SessionID)

	// Session mismatch after a resume.
	_, err = a.Result(resume, runner.ExitState{}, readStream(t, "stream_success"), out)
	require.ErrorContains(t, err, "asked for session")

	// Max turns, killed, empty output.
	_, err = a.Result(answer, runner.ExitState{Code: 1}, readStream(t, "stream_max_turns"), out)
	require.ErrorContains(t, err, "error_max_turns")
	_, err = a.Result(answer, runner.ExitState{Code: 143, Killed: true}, readStream(t, "stream_success"), out)
	require.ErrorContains(t, err, "killed")
	_, err = a.Result(answer, runner.ExitState{Code: 1}, nil, out)
	require.ErrorContains(t, err, "no result event")
}
