package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/alfred-bot/alfred/internal/base/runfile"
)

// maxMergeLog caps the commit messages Merge reports per side.
const maxMergeLog = 20

// Merge is what MergeTarget did to a worktree.
type Merge struct {
	// Target is the remote branch merged ("main") and TargetHead its commit.
	Target     string
	TargetHead string
	// UpToDate is true when the branch already contained TargetHead: nothing was merged.
	UpToDate bool
	// Commit is the merge commit when git merged without conflict; the worktree is then clean.
	Commit string
	// Conflicts lists the unmerged paths when git stopped; the worktree is left mid-merge
	// (MERGE_HEAD set, conflict markers in the files) for a conflict_resolution run, to be
	// finished with CommitMerge or abandoned with AbortMerge.
	Conflicts []string
	// Ours and Theirs are the commit messages (full, oldest first, at most 20 each) on the
	// branch and on the target since their merge base.
	Ours, Theirs []string
}

// ErrMergeUnresolved is returned by CommitMerge while a path is unmerged or a file still holds a
// conflict marker; the error text names them.
var ErrMergeUnresolved = errors.New("gitrepo: merge is not resolved")

// MergeTarget fetches the mirror and merges the remote target branch into the worktree's branch
// with a merge commit (git merge --no-ff; history already pushed is never rewritten) whose
// message is message. It never pushes. When git stops on conflicts the result lists them and
// the worktree stays mid-merge, owned by Config.UID as AddWorktree leaves it. Errors: a detached worktree, fetch failure, a missing target, a
// merge git refuses for another reason (the worktree is then reset with merge --abort).
func (m *Manager) MergeTarget(ctx context.Context, p Project, wt *Worktree, target, message string) (*Merge, error) {
	if wt.Branch == "" {
		return nil, errors.New("gitrepo: cannot merge into a detached worktree")
	}
	if m.cfg.AuthorName == "" || m.cfg.AuthorEmail == "" {
		return nil, errors.New("gitrepo: AuthorName and AuthorEmail are required to merge")
	}
	if _, err := m.Sync(ctx, p); err != nil {
		return nil, err
	}
	ref := "refs/remotes/origin/" + target
	head, err := m.gitWT(ctx, wt, nil, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("gitrepo: target branch %q is not on the remote: %w", target, err)
	}
	out := &Merge{Target: target, TargetHead: head}
	if _, err := m.gitWT(ctx, wt, nil, "merge-base", "--is-ancestor", head, "HEAD"); err == nil {
		out.UpToDate = true
		return out, nil
	}
	if out.Ours, out.Theirs, err = m.mergeLogs(ctx, wt, head); err != nil {
		return nil, err
	}
	_, mergeErr := m.gitWT(ctx, wt, nil, "merge", "--no-ff", "--no-verify", "--no-edit", "-m", message, head)
	if mergeErr == nil {
		if out.Commit, err = m.gitWT(ctx, wt, nil, "rev-parse", "HEAD"); err != nil {
			return nil, fmt.Errorf("read merge commit: %w", err)
		}
		wt.Head = out.Commit
		return out, nil
	}
	if out.Conflicts, err = m.UnmergedPaths(ctx, wt); err != nil {
		return nil, err
	}
	if len(out.Conflicts) == 0 {
		_ = m.AbortMerge(ctx, wt)
		return nil, fmt.Errorf("merge %s: %w", target, mergeErr)
	}
	// git wrote the merged files as this process's user: give them back to the container user.
	if os.Geteuid() == 0 && m.cfg.UID > 0 {
		if err := chownTree(wt.Path, m.cfg.UID, m.cfg.GID); err != nil {
			return nil, fmt.Errorf("chown worktree: %w", err)
		}
	}
	return out, nil
}

// mergeLogs returns the commit messages on HEAD and on theirs since their merge base.
func (m *Manager) mergeLogs(ctx context.Context, wt *Worktree, theirs string) (ours, their []string, err error) {
	base, err := m.gitWT(ctx, wt, nil, "merge-base", "HEAD", theirs)
	if err != nil {
		return nil, nil, fmt.Errorf("find merge base: %w", err)
	}
	read := func(tip string) ([]string, error) {
		s, err := m.gitWT(ctx, wt, nil, "log", "--reverse", "--no-merges", "--format=%B%x1e", base+".."+tip)
		if err != nil {
			return nil, fmt.Errorf("read commit messages: %w", err)
		}
		var msgs []string
		for _, msg := range strings.Split(s, "\x1e") {
			if msg = strings.TrimSpace(msg); msg != "" {
				msgs = append(msgs, msg)
			}
		}
		if len(msgs) > maxMergeLog {
			msgs = msgs[len(msgs)-maxMergeLog:]
		}
		return msgs, nil
	}
	if ours, err = read("HEAD"); err != nil {
		return nil, nil, err
	}
	their, err = read(theirs)
	return ours, their, err
}

// UnmergedPaths lists the worktree's unmerged paths (git diff --name-only --diff-filter=U),
// sorted; none outside a merge.
func (m *Manager) UnmergedPaths(ctx context.Context, wt *Worktree) ([]string, error) {
	s, err := m.gitWT(ctx, wt, nil, "diff", "--name-only", "--diff-filter=U", "-z", "--ignore-submodules=all")
	if err != nil {
		return nil, fmt.Errorf("list unmerged paths: %w", err)
	}
	var out []string
	for _, p := range strings.Split(s, "\x00") {
		if p != "" {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// AbortMerge abandons a merge in progress (git merge --abort); without one it does nothing.
func (m *Manager) AbortMerge(ctx context.Context, wt *Worktree) error {
	if !m.merging(ctx, wt) {
		return nil
	}
	if _, err := m.gitWT(ctx, wt, nil, "merge", "--abort"); err != nil {
		return fmt.Errorf("abort merge: %w", err)
	}
	return nil
}

func (m *Manager) merging(ctx context.Context, wt *Worktree) bool {
	_, err := m.gitWT(ctx, wt, nil, "rev-parse", "--verify", "--quiet", "MERGE_HEAD")
	return err == nil
}

// CommitMerge finishes a merge that MergeTarget left with conflicts: it refuses, with
// ErrMergeUnresolved, while one of the conflicted paths still holds a conflict marker (see
// ConflictMarkers; nil conflicted means the paths git lists as unmerged now) or git still lists
// an unmerged path after staging everything; otherwise it
// commits the merge (two parents) with the bot identity and returns its sha. Errors: no merge
// in progress.
func (m *Manager) CommitMerge(ctx context.Context, wt *Worktree, conflicted []string, message string) (string, error) {
	if !m.merging(ctx, wt) {
		return "", errors.New("gitrepo: no merge in progress")
	}
	if re := m.treeRefusal(ctx, wt); re != nil {
		return "", fmt.Errorf("stage changes: %w: %w", ErrMergeUnresolved, re)
	}
	if conflicted == nil {
		var err error
		if conflicted, err = m.UnmergedPaths(ctx, wt); err != nil {
			return "", err
		}
	}
	marked, err := ConflictMarkers(wt.Path, conflicted)
	if err != nil {
		return "", err
	}
	if len(marked) > 0 {
		return "", fmt.Errorf("%w: conflict markers left in %s", ErrMergeUnresolved, strings.Join(marked, ", "))
	}
	if re := m.checkChangedSizes(ctx, wt); re != nil {
		return "", fmt.Errorf("stage changes: %w: %w", ErrMergeUnresolved, re)
	}
	if _, err := m.gitWT(ctx, wt, nil, "add", "--all"); err != nil {
		if re := m.notRegularTracked(ctx, wt); re != nil {
			return "", fmt.Errorf("stage changes: %w: %w", ErrMergeUnresolved, re)
		}
		return "", fmt.Errorf("stage changes: %w", err)
	}
	unmerged, err := m.UnmergedPaths(ctx, wt)
	if err != nil {
		return "", err
	}
	if len(unmerged) > 0 {
		return "", fmt.Errorf("%w: unmerged paths %s", ErrMergeUnresolved, strings.Join(unmerged, ", "))
	}
	return m.commitStaged(ctx, wt, message)
}

// conflictMarkers are the line starts git writes around a conflict (merge and diff3 styles),
// each followed by a space or the end of the line; "=======" alone on its line separates the
// sides.
var conflictMarkers = []string{"<<<<<<<", ">>>>>>>", "|||||||"}

// maxMarkerScanBytes bounds a conflicted file ConflictMarkers reads.
const maxMarkerScanBytes = 64 << 20

// ConflictMarkers returns the paths among paths (relative to root) that still hold a line
// starting with a conflict marker ("<<<<<<< ", ">>>>>>> ", "||||||| " or a line that is only
// "======="), sorted. A path that no longer exists holds none. Errors: a file cannot be read,
// or a path escapes root; a path that is a link out of root, a FIFO, a device or a file over
// 64 MiB wraps ErrMergeUnresolved and a *runfile.RefusedError (the run left it: not resolved).
func ConflictMarkers(root string, paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		full := filepath.Join(root, filepath.FromSlash(p))
		rel, err := filepath.Rel(root, full)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("gitrepo: path %q is outside the worktree", p)
		}
		if st, err := os.Lstat(full); err == nil && st.Mode()&os.ModeSymlink != 0 {
			continue // git keeps a link's target, never a conflict marker, in the link itself
		}
		// The agent ran in the worktree: its files are read as hostile (internal/base/runfile).
		b, err := runfile.Read(root, filepath.ToSlash(rel), maxMarkerScanBytes)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if errors.Is(err, runfile.ErrRefused) {
			return nil, fmt.Errorf("%w: %w", ErrMergeUnresolved, err)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		if hasConflictMarker(b) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// hasConflictMarker reports whether a line of b is a conflict marker. Every line is looked at,
// however long (b is bounded by maxMarkerScanBytes): no line buffer's limit ends the look early.
func hasConflictMarker(b []byte) bool {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimRight(line, "\r")
		if string(line) == "=======" {
			return true
		}
		for _, mk := range conflictMarkers {
			if rest, ok := bytes.CutPrefix(line, []byte(mk)); ok && (len(rest) == 0 || rest[0] == ' ') {
				return true
			}
		}
	}
	return false
}

// MaxDiffBytes bounds the diff Diff returns (200 KiB); a longer diff is cut and ends with a
// line saying so.
const MaxDiffBytes = 200 << 10

// Diff returns the unified diff from the merge base of base and head to head (git diff
// base...head), cut at MaxDiffBytes. base and head are commits or remote branches
// ("origin/main"); the mirror is not fetched. git's output is read while it runs and only up
// to the bound (the agent's files can make it gigabytes): git is stopped there.
func (m *Manager) Diff(ctx context.Context, wt *Worktree, base, head string) (string, error) {
	var buf []byte
	errCut := errors.New("diff over the bound")
	err := m.gitWTStream(ctx, wt, nil, func(r io.Reader) error {
		var err error
		buf, err = io.ReadAll(io.LimitReader(r, MaxDiffBytes+1))
		if err == nil && len(buf) > MaxDiffBytes {
			return errCut
		}
		return err
	}, "diff", "--no-color", "--no-ext-diff", base+"..."+head)
	if err != nil && !errors.Is(err, errCut) {
		return "", fmt.Errorf("diff %s...%s: %w", base, head, err)
	}
	if len(buf) <= MaxDiffBytes {
		return strings.TrimSpace(string(buf)), nil
	}
	cut := bytes.LastIndexByte(buf[:MaxDiffBytes], '\n')
	return string(buf[:max(cut, 0)]) + fmt.Sprintf("\n[diff cut at %d KiB]", MaxDiffBytes>>10), nil
}

// MergeBase returns the merge base of a and b.
func (m *Manager) MergeBase(ctx context.Context, wt *Worktree, a, b string) (string, error) {
	s, err := m.gitWT(ctx, wt, nil, "merge-base", a, b)
	if err != nil {
		return "", fmt.Errorf("merge base of %s and %s: %w", a, b, err)
	}
	return s, nil
}
