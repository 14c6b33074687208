package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/alfred-bot/alfred/internal/base/runfile"
	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
)

// maxConflictFileBytes bounds the content of one conflicted file handed to the agent (the file
// itself is in the worktree).
const maxConflictFileBytes = 64 << 10

// checkoutOf says what a job's worktree holds: a review of a merge request that is not the
// bot's reads its source branch (job.Branch) detached, since nothing is pushed; every other
// phase works on the mailbox's branch.
func checkoutOf(job phase.Job) gitrepo.Checkout {
	if job.Input.Phase == phase.Review {
		return gitrepo.Checkout{Base: job.Branch}
	}
	return gitrepo.Checkout{Branch: job.Branch}
}

// prepareGit is the git work of a job before its agent runs: the diff of a review_fix, review or
// self_review run (prepareReview) and the guidelines a self_review reads (guidelines), the merge
// step of a conflict_resolution run (mergeTarget). A non-nil outcome is final: the job needs no
// agent run.
func prepareGit(ctx context.Context, mgr *gitrepo.Manager, p gitrepo.Project, wt *gitrepo.Worktree, job *phase.Job) (*phase.Outcome, error) {
	switch job.Input.Phase {
	case phase.ReviewFix, phase.Review, phase.SelfReview:
		if err := prepareReview(ctx, mgr, wt, &job.Input); err != nil {
			return nil, fmt.Errorf("prepare the review: %w", err)
		}
		if job.Input.Phase == phase.SelfReview {
			job.Input.Guidelines = guidelines(wt.Path)
		}
	case phase.ConflictResolution:
		done, _, err := mergeTarget(ctx, mgr, p, wt, job)
		return done, err
	}
	return nil, nil
}

// conflictedPaths are the files a conflict_resolution run got; nil for a run recovery found
// again (CommitMerge then reads the unmerged paths itself).
func conflictedPaths(in phase.Input) []string {
	if in.Conflict == nil {
		return nil
	}
	var out []string
	for _, f := range in.Conflict.Files {
		out = append(out, f.Path)
	}
	return out
}

// prepareReview fills the diff of a review_fix or review run from the worktree: from the merge
// base with the target branch (or from SinceSHA, the head of the bot's previous review, when it
// is still an ancestor) to the worktree's head.
func prepareReview(ctx context.Context, mgr *gitrepo.Manager, wt *gitrepo.Worktree, in *phase.Input) error {
	rv := in.Review
	if rv == nil {
		return nil
	}
	target := "origin/" + cmp.Or(rv.Target, "HEAD")
	base, err := mgr.MergeBase(ctx, wt, target, "HEAD")
	if err != nil {
		return err
	}
	rv.BaseSHA, rv.HeadSHA = base, wt.Head
	from := target
	if rv.SinceSHA != "" {
		if _, err := mgr.MergeBase(ctx, wt, rv.SinceSHA, "HEAD"); err == nil {
			from = rv.SinceSHA
		} else {
			rv.SinceSHA = "" // rewritten or unknown: review everything
		}
	}
	rv.Diff, err = mgr.Diff(ctx, wt, from, "HEAD")
	return err
}

// guidelines returns the files of phase.GuidelineFiles that are regular files of the worktree
// at dir (a link, even to a file inside, is not followed: what the branch holds is input).
func guidelines(dir string) []string {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil
	}
	defer root.Close()
	var out []string
	for _, name := range phase.GuidelineFiles {
		if fi, err := root.Lstat(filepath.FromSlash(name)); err == nil && fi.Mode().IsRegular() {
			out = append(out, name)
		}
	}
	return out
}

// mergeTarget is the merge step of a conflict_resolution run, before the agent: it merges the
// target branch (in.Conflict.Target, else the repository's default branch) into the worktree's
// branch. When git merges on its own (or the branch is up to date) the job is done without an
// agent run: the returned outcome is final (the merge commit pushed, HeadSHA set; HeadSHA ""
// when there was nothing to merge). Otherwise it fills in.Conflict with the conflicted files
// and both sides' commit messages and returns the conflicted paths for publishMerge.
func mergeTarget(ctx context.Context, mgr *gitrepo.Manager, p gitrepo.Project, wt *gitrepo.Worktree, job *phase.Job) (*phase.Outcome, []string, error) {
	in := &job.Input
	if in.Conflict == nil {
		in.Conflict = &phase.ConflictInput{}
	}
	target := cmp.Or(in.Conflict.Target, job.Repository.DefaultBranch)
	in.Conflict.Target = target
	msg := fmt.Sprintf("Merge branch '%s' into %s", target, wt.Branch)
	m, err := mgr.MergeTarget(ctx, p, wt, target, msg)
	if err != nil {
		return nil, nil, fmt.Errorf("merge %s: %w", target, err)
	}
	switch {
	case m.UpToDate:
		return &phase.Outcome{Result: &phase.Result{Summary: fmt.Sprintf("The branch already contains %s.", target)}}, nil, nil
	case m.Commit != "":
		if err := mgr.Push(ctx, wt); err != nil {
			if refused := leakRefusal(err); refused != "" {
				return &phase.Outcome{Failure: refused}, nil, nil
			}
			return nil, nil, fmt.Errorf("push %s: %w", wt.Branch, err)
		}
		return &phase.Outcome{HeadSHA: m.Commit, Result: &phase.Result{
			Summary: fmt.Sprintf("Merged %s into the branch; git resolved it without conflicts.", target)}}, nil, nil
	}
	in.Conflict.Ours, in.Conflict.Theirs = m.Ours, m.Theirs
	in.Conflict.Files = nil
	for _, path := range m.Conflicts {
		// A committed link may lead out of the worktree: its content is read through
		// internal/base/runfile and never from outside.
		b, cut, err := runfile.ReadHead(wt.Path, path, maxConflictFileBytes)
		if err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, runfile.ErrRefused) {
			return nil, nil, fmt.Errorf("read conflicted %s: %w", path, err)
		}
		content := string(b)
		switch {
		case errors.Is(err, runfile.ErrRefused):
			content = "[not shown: " + err.Error() + "]"
		case cut:
			content += "\n[cut: the whole file is in the workspace]"
		}
		in.Conflict.Files = append(in.Conflict.Files, phase.ConflictFile{Path: path, Content: content})
	}
	return nil, m.Conflicts, nil
}

// publishMerge commits the merge a conflict_resolution run resolved and pushes it. A result that
// leaves a conflict marker or an unmerged path, or a merge that adds a secret (leakRefusal), is
// refused: refused says why (words fit for a comment), nothing is pushed, and err is nil. What
// the agent left that git must not stage (a FIFO, a file over gitrepo.MaxCommitFileBytes) is
// refused the same way, as hostile output: hostile is its reason (internal/base/runfile).
func publishMerge(ctx context.Context, mgr *gitrepo.Manager, wt *gitrepo.Worktree, conflicted []string, message string) (sha, refused, hostile string, err error) {
	sha, err = mgr.CommitMerge(ctx, wt, conflicted, message)
	if re := (*runfile.RefusedError)(nil); errors.As(err, &re) && errors.Is(err, gitrepo.ErrMergeUnresolved) {
		return "", "the merge is not resolved: " + refusedCommit(re), re.Reason, nil
	}
	if errors.Is(err, gitrepo.ErrMergeUnresolved) {
		_, after, _ := strings.Cut(err.Error(), gitrepo.ErrMergeUnresolved.Error()+": ")
		return "", "the merge is not resolved: " + cmp.Or(after, err.Error()), "", nil
	}
	if err != nil {
		return "", "", "", fmt.Errorf("commit the merge: %w", err)
	}
	if err := mgr.Push(ctx, wt); err != nil {
		if refused := leakRefusal(err); refused != "" {
			return "", refused, "", nil
		}
		return "", "", "", fmt.Errorf("push %s: %w", wt.Branch, err)
	}
	return sha, "", "", nil
}
