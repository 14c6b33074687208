package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// reviewRepo is a bare repository with main (README) and alice/docs two commits ahead, and a
// git manager over a temporary data directory.
func reviewRepo(t *testing.T) (mgr *gitrepo.Manager, p gitrepo.Project, first string) {
	t.Helper()
	dir := t.TempDir()
	bare, work := filepath.Join(dir, "repo.git"), filepath.Join(dir, "work")
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.org", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.org")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("init", "--quiet", "--bare", "-b", "main", bare)
	git("init", "--quiet", "-b", "main", work)
	require.NoError(t, os.WriteFile(filepath.Join(work, "README"), []byte("hi\n"), 0o644))
	git("-C", work, "add", ".")
	git("-C", work, "commit", "--quiet", "-m", "init")
	git("-C", work, "push", "--quiet", bare, "main")
	git("-C", work, "checkout", "--quiet", "-b", "alice/docs")
	for i, content := range []string{"first\n", "first\nsecond\n"} {
		require.NoError(t, os.WriteFile(filepath.Join(work, "docs.md"), []byte(content), 0o644))
		git("-C", work, "add", "docs.md")
		git("-C", work, "commit", "--quiet", "-m", "docs")
		if i == 0 {
			first = git("-C", work, "rev-parse", "HEAD")
		}
	}
	git("-C", work, "push", "--quiet", bare, "alice/docs")
	mgr, err := gitrepo.New(gitrepo.Config{DataDir: filepath.Join(dir, "data"), AuthorName: "Alfred", AuthorEmail: "a@example.org"})
	require.NoError(t, err)
	return mgr, gitrepo.Project{Forge: "fj", Path: "acme/shop", CloneURL: bare, DefaultBranch: "main"}, first
}

func TestPrepareReviewDiffsSinceTheLastReview(t *testing.T) {
	t.Parallel()
	mgr, p, first := reviewRepo(t)
	ctx := t.Context()
	job := phase.Job{Branch: "alice/docs", Repository: forge.Repository{DefaultBranch: "main"},
		Input: phase.Input{Phase: phase.Review, Review: &phase.ReviewInput{Target: "main"}}}
	co := checkoutOf(job)
	require.Equal(t, gitrepo.Checkout{Base: "alice/docs"}, co, "a review reads the source branch detached")
	wt, err := mgr.AddWorktree(ctx, p, "alfred-mbx1-r1-review-a1", co)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mgr.RemoveWorktree(ctx, wt) })

	require.NoError(t, prepareReview(ctx, mgr, wt, &job.Input))
	rv := job.Input.Review
	require.Equal(t, wt.Head, rv.HeadSHA)
	require.NotEmpty(t, rv.BaseSHA)
	require.Contains(t, rv.Diff, "+first")
	require.Contains(t, rv.Diff, "+second")

	// Asked again: only what changed since the head of the previous review.
	job.Input.Review = &phase.ReviewInput{Target: "main", SinceSHA: first}
	require.NoError(t, prepareReview(ctx, mgr, wt, &job.Input))
	require.Equal(t, first, job.Input.Review.SinceSHA)
	require.Contains(t, job.Input.Review.Diff, "+second")
	require.NotContains(t, job.Input.Review.Diff, "+first")

	// A since head the branch no longer has (rewritten): everything again.
	job.Input.Review = &phase.ReviewInput{Target: "main", SinceSHA: strings.Repeat("0", 40)}
	require.NoError(t, prepareReview(ctx, mgr, wt, &job.Input))
	require.Empty(t, job.Input.Review.SinceSHA)
	require.Contains(t, job.Input.Review.Diff, "+first")
}

func TestMergeTargetStepWithoutAgent(t *testing.T) {
	t.Parallel()
	mgr, p, _ := reviewRepo(t)
	ctx := t.Context()
	// The branch already holds main: nothing to merge, nothing pushed.
	job := phase.Job{Branch: "alice/docs", Repository: forge.Repository{DefaultBranch: "main"},
		Input: phase.Input{Phase: phase.ConflictResolution}}
	wt, err := mgr.AddWorktree(ctx, p, "alfred-mbx1-r2-conflict_resolution-a1", checkoutOf(job))
	require.NoError(t, err)
	t.Cleanup(func() { _ = mgr.RemoveWorktree(ctx, wt) })
	done, conflicts, err := mergeTarget(ctx, mgr, p, wt, &job)
	require.NoError(t, err)
	require.NotNil(t, done, "no agent run")
	require.Empty(t, done.HeadSHA)
	require.Empty(t, conflicts)
	require.Equal(t, "main", job.Input.Conflict.Target)
}

// A self_review run gets its merge request's diff and the guideline files the worktree holds
// as regular files (a link is not followed).
func TestPrepareSelfReviewDiffAndGuidelines(t *testing.T) {
	t.Parallel()
	mgr, p, _ := reviewRepo(t)
	ctx := t.Context()
	job := phase.Job{Branch: "alice/docs", Repository: forge.Repository{DefaultBranch: "main"},
		Input: phase.Input{Phase: phase.SelfReview, Review: &phase.ReviewInput{MergeRequest: 2, Target: "main"}}}
	co := checkoutOf(job)
	require.Equal(t, gitrepo.Checkout{Branch: "alice/docs"}, co, "the bot's own branch")
	wt, err := mgr.AddWorktree(ctx, p, "alfred-mbx1-r1-self-review-a1", co)
	require.NoError(t, err)
	t.Cleanup(func() { _ = mgr.RemoveWorktree(ctx, wt) })
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "CONTRIBUTING.md"), []byte("Test everything.\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, ".editorconfig"), []byte("root = true\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(wt.Path, ".github"), 0o755))
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(wt.Path, "AGENTS.md")))

	done, err := prepareGit(ctx, mgr, p, wt, &job)
	require.NoError(t, err)
	require.Nil(t, done, "the agent runs")
	require.Contains(t, job.Input.Review.Diff, "+second")
	require.Equal(t, wt.Head, job.Input.Review.HeadSHA)
	require.Equal(t, []string{"CONTRIBUTING.md", ".editorconfig"}, job.Input.Guidelines)
}
