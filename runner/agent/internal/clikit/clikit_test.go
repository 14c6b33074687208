package clikit_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/internal/clikit"
	"github.com/alfred-bot/alfred/runner/phase"
)

func TestVersions(t *testing.T) {
	t.Parallel()
	vs := clikit.Versions{MinPatch: map[string]int{"2.1": 332, "0.171": 0}, Exact: []string{"2.2.0"}}
	for v, want := range map[string]bool{
		"2.1.332": true, "2.1.1000": true, "2.1.331": false, "0.171.0": true, "0.172.0": false,
		"2.2.0": true, "2.2.1": false, "2.1.332-rc1": false, "v2.1.332": false, "": false,
	} {
		require.Equal(t, want, vs.Verified(v), v)
	}
	for out, want := range map[string]string{
		"2.1.332 (Claude Code)": "2.1.332", "codex-cli 0.171.0": "0.171.0",
		"GitHub Copilot CLI 1.0.102.\nupdate hint 9.9.9": "1.0.102", "0.61.0\n": "0.61.0",
	} {
		got, err := clikit.ParseVersion("x", out)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := clikit.ParseVersion("x", "not found")
	require.ErrorContains(t, err, "x: no version")
}

func TestJSONObjectAndStderr(t *testing.T) {
	t.Parallel()
	for text, ok := range map[string]bool{`{"a":1}`: true, "```json\n{\"a\":1}\n```": true, "```\n{\"a\":1}\n```": true, "text": false, `{"a":`: false, `[1]`: false} {
		_, got := clikit.JSONObject(text)
		require.Equal(t, ok, got, text)
	}
	require.Equal(t, "Error: Session not found", clikit.StderrLine([]byte("noise\n\x1b[91m\x1b[1mError: \x1b[0mSession not found\n"), "Session not found"))
	require.Empty(t, clikit.StderrLine(nil, "x"))
	require.True(t, clikit.IsUUID("0c6f0d2e-5b7a-4f7e-8d3c-2a1b9e8f7d6c"))
	require.False(t, clikit.IsUUID("ses_dd978d013ffevEdzscdyV75hDc"))
}

func TestErrors(t *testing.T) {
	t.Parallel()
	var err error = &clikit.SessionNotFoundError{Agent: "codex", SessionID: "id", Signal: "no rollout found for thread id id"}
	require.ErrorIs(t, err, runner.ErrSessionNotFound)
	require.Equal(t, "codex: cannot resume session id: no rollout found for thread id id", err.Error())
	err = &clikit.MismatchError{Agent: "gemini", Requested: "a", Got: "b"}
	require.False(t, errors.Is(err, runner.ErrSessionNotFound))
}

func TestLines(t *testing.T) {
	t.Parallel()
	var types []string
	ev, sk := clikit.Lines([]byte("{\"type\":\"a\"}\nnoise\n\n{\"type\":\"b\"}\n{\"type\":"), func(typ string, _ []byte) { types = append(types, typ) })
	require.Equal(t, 2, ev)
	require.Equal(t, 2, sk)
	require.Equal(t, []string{"a", "b"}, types)
}

func TestPrompt(t *testing.T) {
	t.Parallel()
	p, err := clikit.Prompt("codex", phase.Input{Phase: phase.Answer, Title: "Q"})
	require.NoError(t, err)
	require.Contains(t, p, "/alfred/out/result.json")
	_, err = clikit.Prompt("codex", phase.Input{Phase: "bogus"})
	require.ErrorContains(t, err, "codex: no instructions")
	require.Equal(t, "m", clikit.Model(phase.Input{}, "m"))
	require.Equal(t, "x", clikit.Model(phase.Input{Model: "x"}, "m"))
}

// Every CLI adapter's self_review prompt: read-only, the plan, the guidelines found in the
// worktree, where the diff is, and the findings contract.
func TestPromptSelfReview(t *testing.T) {
	t.Parallel()
	p, err := clikit.Prompt("claude-code", phase.Input{Phase: phase.SelfReview, Title: "Export", Plan: "Add export.csv.",
		Guidelines: []string{"CONTRIBUTING.md", ".editorconfig"}, Review: &phase.ReviewInput{MergeRequest: 2, Diff: "+x"}})
	require.NoError(t, err)
	for _, want := range []string{"mounted READ-ONLY", "## Validated plan\nAdd export.csv.",
		"## The repository's guidelines\n- /workspace/CONTRIBUTING.md\n- /workspace/.editorconfig\n",
		`"review.diff" in /alfred/in/input.json`, `"severity": "blocking"`, "Your task (self_review)"} {
		require.Contains(t, p, want)
	}
	p, err = clikit.Prompt("claude-code", phase.Input{Phase: phase.Review, Title: "Export"})
	require.NoError(t, err)
	require.NotContains(t, p, "review.diff", "other phases' prompts are unchanged")
}
