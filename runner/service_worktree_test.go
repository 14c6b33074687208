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

// The failed development run changes a tracked file and writes an untracked and an ignored
// one; the ci_fix run after it writes its fix.
const worktreeScript = `
development:
  summary: Wrote and failed.
  exit_code: 1
  no_result: true
  files:
    README: "changed by the failed run\n"
    junk.txt: "untracked\n"
    build.log: "ignored\n"
ci_fix:
  summary: Fixed.
  commit_message: "Fix the build"
  files:
    fix.txt: "fix\n"
`

// A mailbox's runs share its worktree, and nothing a container wrote survives into the next
// run: the failed run's tracked change, untracked file and ignored file are neither committed
// by the next run nor left in the worktree. When the mailbox closes, its worktree goes (kept
// clean as the project's spare).
func TestServiceWorktreeKeptCleanAndRetired(t *testing.T) {
	ctx := context.Background()
	d := setupDocker(t, ctx, worktreeScript)
	dir := t.TempDir()
	bare := seedRemote(t, dir, map[string]string{"README": "original\n", ".gitignore": "*.log\n"})
	git := func(args ...string) string { return runGit(t, args...) }

	data := filepath.Join(dir, "data")
	mgr, err := gitrepo.New(gitrepo.Config{DataDir: data, AuthorName: "Alfred", AuthorEmail: "a@example.org",
		UID: runtimetest.ImageUID, GID: runtimetest.ImageGID})
	require.NoError(t, err)
	svc := runner.NewService(d.executor(t, time.Minute), map[string]*gitrepo.Manager{"gl": mgr}, runner.SessionConfig{}, nil)
	const mailboxID, branch = 41, "agent/issue-7-worktree"
	job := func(runID int64, p phase.Phase) phase.Job {
		return phase.Job{MailboxID: mailboxID, RunID: runID, Attempt: 1, ForgeName: "gl", Branch: branch, Push: true,
			Repository: forge.Repository{Path: "acme/shop", DefaultBranch: "main", CloneURL: bare},
			Input:      phase.Input{Phase: p, Repo: "acme/shop", Issue: 7}}
	}
	wt := filepath.Join(data, "worktrees", runner.WorktreeName(mailboxID))

	out, err := svc.Execute(ctx, job(1, phase.Development))
	require.NoError(t, err)
	require.NotEmpty(t, out.Failure, "output:\n%s", out.Output)
	require.FileExists(t, filepath.Join(wt, "junk.txt"), "the failed run's files are still there until the next run")

	out, err = svc.Execute(ctx, job(2, phase.CIFix))
	require.NoError(t, err)
	require.Empty(t, out.Failure, "output:\n%s", out.Output)
	require.NotEmpty(t, out.HeadSHA)
	require.Equal(t, ".gitignore\nREADME\nfix.txt", git("-C", bare, "ls-tree", "--name-only", branch))
	require.Equal(t, "original", git("-C", bare, "show", branch+":README"))
	require.NoFileExists(t, filepath.Join(wt, "junk.txt"))
	require.NoFileExists(t, filepath.Join(wt, "build.log"))

	require.NoError(t, svc.Cleanup(ctx, mailboxID))
	require.NoDirExists(t, wt)
	entries, err := os.ReadDir(filepath.Join(data, "worktrees"))
	require.NoError(t, err)
	require.Empty(t, entries)
	spares, err := os.ReadDir(filepath.Join(data, "spares"))
	require.NoError(t, err)
	require.Len(t, spares, 1, "the project keeps one spare")
}
