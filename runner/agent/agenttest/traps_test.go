package agenttest_test

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Cross-adapter traps on the compiled command lines (no Docker needed); each adapter package
// has the stream-level trap tests of its CLI.

var secrets = []string{"sk-ant-standin-key", "sk-codex-standin-key", "sk-opencode-standin-key", "github_pat_standin_token_0123456789", "AIza-standin-key"}

func inputs(a runner.SessionAgent) []phase.Input {
	base := phase.Input{Phase: phase.Answer, Key: "answer", Attempt: 1, Title: "Which API?", SessionName: "agent/issue-1-x"}
	fresh, resume := base, base
	if a.Capabilities().CallerChosenID {
		fresh.SessionID = uuid.NewString()
	}
	resume.SessionID, resume.Resume = unknownID(a), true
	return []phase.Input{base, fresh, resume}
}

// TestTrapLatestResumeNeverUsed: every "latest"-style resume falls back to a new session
// without an error when nothing matches (spec/agents.md, "Adapter notes" 2); no adapter emits one.
func TestTrapLatestResumeNeverUsed(t *testing.T) {
	t.Parallel()
	for _, a := range adapters(t, "img") {
		for _, in := range inputs(a) {
			inv, err := a.Command(in)
			require.NoError(t, err, a.Name())
			for _, arg := range inv.Cmd {
				for _, bad := range []string{"-c", "--continue", "--last", "latest", "-r"} {
					require.NotEqual(t, bad, arg, "%s: %v", a.Name(), in)
				}
			}
			if in.Resume {
				require.True(t, strings.Contains(strings.Join(inv.Cmd, "\x00"), in.SessionID), "%s resumes by the exact id", a.Name())
			}
		}
	}
}

// TestTrapStdinClosed: containers run with stdin closed (no OpenStdin), and Codex, opencode and
// Gemini would combine piped stdin with the prompt (spec/agents.md "General rules"). Every
// invocation carries the prompt in argv and never asks for stdin with "-".
func TestTrapStdinClosed(t *testing.T) {
	t.Parallel()
	for _, a := range adapters(t, "img") {
		for _, in := range inputs(a) {
			inv, err := a.Command(in)
			require.NoError(t, err)
			require.NotContains(t, inv.Cmd, "-", a.Name())
			require.True(t, strings.Contains(strings.Join(inv.Cmd, "\x00"), "Which API?"), "%s: prompt in argv", a.Name())
		}
	}
}

// TestSecretsOnlyInEnv: API keys and tokens are in Invocation.Env, never in Cmd.
func TestSecretsOnlyInEnv(t *testing.T) {
	t.Parallel()
	for _, a := range adapters(t, "img") {
		inv, err := a.Command(inputs(a)[1])
		require.NoError(t, err)
		joined := strings.Join(inv.Cmd, " ")
		found := false
		for _, s := range secrets {
			require.NotContains(t, joined, s, a.Name())
			for _, e := range inv.Env {
				found = found || strings.HasSuffix(e, "="+s)
			}
		}
		require.True(t, found, "%s passes its key in Env", a.Name())
	}
}

// TestAdaptersTakeStderr: every adapter of this repository reads the CLI's stderr when given
// it (the resume-miss signal of four CLIs is only there).
func TestAdaptersTakeStderr(t *testing.T) {
	t.Parallel()
	for _, a := range adapters(t, "img") {
		_, ok := a.(agenttest.StderrResulter)
		require.True(t, ok, a.Name())
	}
}

func TestConfigRoot(t *testing.T) {
	t.Parallel()
	root, rel, ok := agenttest.ConfigRoot("/alfred/home/.gemini/tmp/workspace/chats")
	require.True(t, ok)
	require.Equal(t, "/alfred/home/.gemini", root)
	require.Equal(t, "tmp/workspace/chats", rel)
	_, _, ok = agenttest.ConfigRoot("/alfred/home/.opencode-sessions")
	require.False(t, ok)
	_, _, ok = agenttest.ConfigRoot("/elsewhere/x/y")
	require.False(t, ok)
}
