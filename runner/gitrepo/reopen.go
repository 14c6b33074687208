package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrWorktreeNotFound: Reopen found no worktree of that name (removed, or never added).
var ErrWorktreeNotFound = errors.New("gitrepo: worktree not found")

// Reopen returns the worktree <DataDir>/worktrees/<name> added by an earlier process (one that
// stopped during the run), so that a recovered run can be committed and pushed. The git dir,
// branch and head are read from the mirrors (<mirror>/worktrees/<id>/gitdir and HEAD), never from
// the worktree's own .git file, which the agent could have rewritten.
//
// Errors: invalid name; ErrWorktreeNotFound when the directory or its record in a mirror is gone.
func (m *Manager) Reopen(ctx context.Context, name string) (*Worktree, error) {
	if !runNameRe.MatchString(name) {
		return nil, fmt.Errorf("gitrepo: invalid worktree name %q", name)
	}
	path := m.WorktreeDir(name)
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrWorktreeNotFound, name)
	}
	if gitDir := m.recordedGitDirAny(path); gitDir != "" {
		wt := &Worktree{Name: name, Path: path, gitDir: gitDir, mirror: filepath.Dir(filepath.Dir(gitDir))}
		if head, err := os.ReadFile(filepath.Join(gitDir, "HEAD")); err == nil {
			if ref, ok := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: refs/heads/"); ok {
				wt.Branch = ref
			}
		}
		sha, err := m.gitWT(ctx, wt, nil, "rev-parse", "HEAD")
		if err != nil {
			return nil, fmt.Errorf("read head of worktree %s: %w", name, err)
		}
		wt.Head = sha
		return wt, nil
	}
	return nil, fmt.Errorf("%w: %s has no record in any mirror", ErrWorktreeNotFound, name)
}
