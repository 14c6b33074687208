package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// The agent's key, as its container sees it: a canary without a recognisable format, found
// only because it is a configured secret.
const canaryAgentKey = "canary-agent-key-c0ffee5eed42"

// The development run writes the agent's key into a .env; the ci_fix run after it writes a
// clean change.
const leakScript = `
development:
  summary: Added the export.
  commit_message: "Add the export"
  files:
    export.go: "package export\n"
    .env: "ANTHROPIC_API_KEY=` + canaryAgentKey + `\n"
ci_fix:
  summary: Fixed.
  commit_message: "Fix the build"
  files:
    fix.txt: "fix\n"
`

// Hostile: an agent commits the secret it was given. The run is not published: its failure
// names the file and the kind of secret (never the secret), the remote has no branch, and the
// next run starts from the branch as the forge has it, so the key never leaves.
func TestServiceRefusesToPushTheAgentsKey(t *testing.T) {
	ctx := context.Background()
	d := setupDocker(t, ctx, leakScript)
	dir := t.TempDir()
	bare := seedRemote(t, dir, map[string]string{"README": "original\n"})
	git := func(args ...string) string { return runGit(t, args...) }

	mgr, err := gitrepo.New(gitrepo.Config{DataDir: filepath.Join(dir, "data"), AuthorName: "Alfred", AuthorEmail: "a@example.org",
		UID: runtimetest.ImageUID, GID: runtimetest.ImageGID,
		Secrets: []gitrepo.NamedSecret{{Name: "agents[0].api_key", Value: canaryAgentKey}}})
	require.NoError(t, err)
	svc := runner.NewService(d.executor(t, time.Minute), map[string]*gitrepo.Manager{"gl": mgr}, runner.SessionConfig{}, nil)
	const mailboxID, branch = 43, "agent/issue-8-leak"
	job := func(runID int64, p phase.Phase) phase.Job {
		return phase.Job{MailboxID: mailboxID, RunID: runID, Attempt: 1, ForgeName: "gl", Branch: branch, Push: true,
			Repository: forge.Repository{Path: "acme/shop", DefaultBranch: "main", CloneURL: bare},
			Input:      phase.Input{Phase: p, Repo: "acme/shop", Issue: 8}}
	}

	out, err := svc.Execute(ctx, job(1, phase.Development))
	require.NoError(t, err, "a refused push is the run's failure, not an infrastructure error")
	require.Contains(t, out.Failure, "I did not push the commit: `.env` holds the value of agents[0].api_key")
	golden := filepath.Join("testdata", "leak_refusal.golden.txt")
	if *update {
		require.NoError(t, os.WriteFile(golden, []byte(out.Failure+"\n"), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), out.Failure+"\n", "the words of the refusal in the issue")
	require.NotContains(t, out.Failure, canaryAgentKey)
	require.Nil(t, out.Result, "a refused run has no result to act on")
	require.Empty(t, out.HeadSHA)
	require.Empty(t, git("-C", bare, "branch", "--list", branch), "nothing reached the remote")

	out, err = svc.Execute(ctx, job(2, phase.CIFix))
	require.NoError(t, err)
	require.Empty(t, out.Failure, "output:\n%s", out.Output)
	require.NotEmpty(t, out.HeadSHA)
	require.Equal(t, "README\nfix.txt", git("-C", bare, "ls-tree", "--name-only", branch), "the refused commit is gone")
	require.NotContains(t, git("-C", bare, "log", "-p", "--all"), canaryAgentKey)
}
