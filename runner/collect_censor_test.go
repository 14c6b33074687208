package runner_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/phase"
)

// Every text of an agent's result (the summary and commit message here) is censored where it
// is collected: what is stored, posted and committed never holds a secret the agent printed.
func TestCollectedResultIsCensored(t *testing.T) {
	t.Parallel()
	agent, err := script.NewFromBytes("alfred/script-agent:test", []byte(`
development:
  summary: "Deployed with sekrit as the key."
  commit_message: "feat: use sekrit"
`))
	require.NoError(t, err)
	b := setupFake(t, func(c *runner.Config) { c.Agents = map[string]runner.Agent{"script": agent} })
	b.rt.onStart = playOnHost(t)
	out, err := b.exec.Run(t.Context(), runner.RunRequest{MailboxID: 1, RunID: 2, Attempt: 1, Worktree: b.worktree,
		Input: phase.Input{Phase: phase.Development, Repo: "group/repo", Issue: 7, Title: "Add x"}})
	require.NoError(t, err)
	require.Equal(t, runner.StatusSucceeded, out.Status, "%v", out.Err)
	require.Equal(t, "Deployed with [redacted] as the key.", out.Result.Summary)
	require.Equal(t, "feat: use [redacted]", out.Result.CommitMessage)
}
