package runner_test

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// Hostile: an agent's commit message closes another issue ("Fixes #7") when the merge request
// is merged, as GitLab and Forgejo read the closing keywords of the commits that reach the
// default branch. The commit Alfred pushes says the same to a reader, but its keyword is
// defused (forge.DefuseClosingReferences).
func TestServicePushesNoClosingKeywordOfTheAgent(t *testing.T) {
	ctx := context.Background()
	d := setupDocker(t, ctx, `
development:
  summary: Added the export.
  commit_message: "Add the export\n\nFixes #7, closes acme/shop#9"
  files:
    export.go: "package export\n"
`)
	dir := t.TempDir()
	bare := seedRemote(t, dir, map[string]string{"README": "original\n"})
	mgr, err := gitrepo.New(gitrepo.Config{DataDir: filepath.Join(dir, "data"), AuthorName: "Alfred", AuthorEmail: "a@example.org",
		UID: runtimetest.ImageUID, GID: runtimetest.ImageGID})
	require.NoError(t, err)
	svc := runner.NewService(d.executor(t, time.Minute), map[string]*gitrepo.Manager{"gl": mgr}, runner.SessionConfig{}, nil)
	const branch = "agent/issue-8-export"
	out, err := svc.Execute(ctx, phase.Job{MailboxID: 44, RunID: 1, Attempt: 1, ForgeName: "gl", Branch: branch, Push: true,
		Repository: forge.Repository{Path: "acme/shop", DefaultBranch: "main", CloneURL: bare},
		Input:      phase.Input{Phase: phase.Development, Repo: "acme/shop", Issue: 8}})
	require.NoError(t, err)
	require.Empty(t, out.Failure, "output:\n%s", out.Output)
	msg := runGit(t, "-C", bare, "log", "-1", "--format=%B", branch)
	require.Contains(t, msg, "Add the export")
	require.Contains(t, msg, "ixes #7, ", "the message reads the same")
	require.NotRegexp(t, regexp.MustCompile(`(?i)\b(fixes|closes)\s+(acme/shop)?#[79]`), msg, "a closing keyword of the agent's was pushed")
}
