package gitrepo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Prepare returns the worktree of one mailbox, <DataDir>/worktrees/<key>, ready for a run and
// kept between the mailbox's runs, so that a run costs what changed since the last one rather
// than a checkout of the whole repository:
//
//   - It fetches the mirror (Sync) and resolves the commit as AddWorktree does: co.Branch as the
//     remote has it, else a new co.Branch from the base, else detached at the base.
//   - The first time (no worktree of that key), it takes the project's spare worktree (one that
//     Retire or Warm left, already checked out) by moving it to the key, or else adds a worktree
//     from the mirror without checking anything out (git worktree add --no-checkout).
//   - Every time, it applies the project's sparse directories (Project.Sparse, or
//     Config.Projects; none means the whole tree), restores the worktree's .git link (the
//     container could have replaced it), checks out exactly that commit with --force (tracked
//     files the container changed or deleted are restored; files whose stat data match the
//     index are not rewritten) and removes every untracked and ignored file (git clean -ffdx),
//     so nothing a container wrote survives into the next run.
//   - When running as root with Config.UID set, it gives UID:GID what git wrote and updates
//     those files' index entries (ownLocked), so the next run rewrites only what changed.
//
// A directory of the key that git no longer knows is removed and added again. The worktree
// holds co.Branch between runs, so another worktree cannot check the same branch out; Retire
// releases it.
//
// Errors: invalid key; the mirror cannot be locked (ErrMirrorLock, no git run); fetch failure;
// base branch missing on the remote; the branch is checked
// out in another live worktree; any git failure of the steps above.
func (m *Manager) Prepare(ctx context.Context, p Project, key string, co Checkout) (*Worktree, error) {
	p = m.withSettings(p)
	// A second before the start: file systems stamp modifications with a coarse clock.
	start := time.Now().Add(-time.Second)
	if !runNameRe.MatchString(key) {
		return nil, fmt.Errorf("gitrepo: invalid worktree name %q", key)
	}
	dir, err := m.MirrorDir(p)
	if err != nil {
		return nil, err
	}
	unlock, err := m.lock(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := m.syncLocked(ctx, p, dir); err != nil {
		return nil, err
	}
	target, newBranch, err := m.resolve(ctx, p, dir, co)
	if err != nil {
		return nil, err
	}
	wt := &Worktree{Name: key, Path: m.WorktreeDir(key), Branch: co.Branch, NewBranch: newBranch, mirror: dir}
	if wt.gitDir = m.recordedGitDir(dir, wt.Path); wt.gitDir == "" {
		if err := m.addLocked(ctx, dir, wt, target); err != nil {
			return nil, err
		}
	}
	since, err := takeMark(wt, start)
	if err != nil {
		return nil, err
	}
	if err := m.sparseLocked(ctx, p, wt); err != nil {
		return nil, err
	}
	if err := m.resetLocked(ctx, wt, target); err != nil {
		return nil, err
	}
	if err := m.ownLocked(ctx, wt, since); err != nil {
		return nil, err
	}
	return wt, nil
}

// Warm makes sure the project has a spare worktree, so that the first run of its next new
// mailbox moves it into place instead of checking out every file. When none exists, it fetches
// the mirror and checks one out detached at the default branch, under <DataDir>/spares/ with
// the suffix ".warming", then moves it to the spare's place; the checkout itself runs without
// the mirror's lock, so runs of the project's other mailboxes do not wait for it. Call it off
// the path of a run that waits (after a run). Concurrent calls for one mirror do the work once.
func (m *Manager) Warm(ctx context.Context, p Project) error {
	p = m.withSettings(p)
	dir, err := m.MirrorDir(p)
	if err != nil {
		return err
	}
	if _, busy := m.warming.LoadOrStore(dir, true); busy {
		return nil
	}
	defer m.warming.Delete(dir)
	sparePath := m.SpareDir(dir)
	spare := &Worktree{Name: "spare", Path: sparePath + ".warming", mirror: dir}
	unlock, err := m.lock(dir)
	if err != nil {
		return err
	}
	if m.recordedGitDir(dir, sparePath) != "" {
		unlock()
		return nil
	}
	err = m.syncLocked(ctx, p, dir)
	var target string
	if err == nil {
		target, _, err = m.resolve(ctx, p, dir, Checkout{})
	}
	if err == nil {
		err = m.addEmptyLocked(ctx, dir, spare, target)
	}
	unlock()
	if err != nil {
		return err
	}
	err = m.sparseLocked(ctx, p, spare)
	if err == nil {
		err = m.resetLocked(ctx, spare, target)
	}
	if err == nil {
		err = m.ownLocked(ctx, spare, time.Time{})
	}
	unlockAgain, lerr := m.lock(dir)
	if lerr != nil {
		return errors.Join(err, lerr) // the .warming directory is left to the sweep
	}
	defer unlockAgain()
	if err == nil && m.recordedGitDir(dir, sparePath) != "" {
		return m.removeLocked(ctx, dir, spare.Path) // a mailbox retired meanwhile left its own
	}
	if err == nil {
		_ = os.RemoveAll(sparePath) // a directory git does not know
		_, err = m.git(ctx, dir, nil, "worktree", "move", spare.Path, sparePath)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("warm a spare worktree of %s: %w", p.Path, err), m.removeLocked(ctx, dir, spare.Path))
	}
	return nil
}

// Retire ends the worktree Prepare keeps under key (the mailbox closed). When its project has
// no spare worktree yet, the worktree becomes the spare: detached (its branch is released),
// checked out clean at the commit it was on and cleaned of untracked and ignored files, so what
// the last container wrote is deleted now; otherwise it is removed. Retiring a worktree that is
// already gone is not an error.
func (m *Manager) Retire(ctx context.Context, key string) error {
	if !runNameRe.MatchString(key) {
		return fmt.Errorf("gitrepo: invalid worktree name %q", key)
	}
	path := m.WorktreeDir(key)
	gitDir := m.recordedGitDirAny(path)
	if gitDir == "" {
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("remove worktree %s: %w", key, err)
		}
		return nil
	}
	dir := filepath.Dir(filepath.Dir(gitDir))
	unlock, err := m.lock(dir)
	if err != nil {
		return err
	}
	defer unlock()
	wt := &Worktree{Name: key, Path: path, gitDir: gitDir, mirror: dir}
	sparePath := m.SpareDir(dir)
	if m.recordedGitDir(dir, sparePath) != "" {
		return m.removeLocked(ctx, dir, path)
	}
	since, err := takeMark(wt, time.Now().Add(-time.Second))
	if err == nil {
		err = m.resetLocked(ctx, wt, "HEAD")
	}
	if err == nil {
		err = m.ownLocked(ctx, wt, since)
	}
	if err == nil {
		_ = os.RemoveAll(sparePath) // a directory git does not know
		_, err = m.git(ctx, dir, nil, "worktree", "move", path, sparePath)
	}
	if err != nil {
		return errors.Join(fmt.Errorf("keep worktree %s as the spare: %w", key, err), m.removeLocked(ctx, dir, path))
	}
	return nil
}

// SpareDir returns where the spare worktree of a mirror lives:
// <DataDir>/spares/<16 hex digits of the SHA-256 of the mirror's path>. Spares are outside
// <DataDir>/worktrees, which holds only the worktrees of mailboxes.
func (m *Manager) SpareDir(mirror string) string {
	sum := sha256.Sum256([]byte(mirror))
	return filepath.Join(m.cfg.DataDir, "spares", hex.EncodeToString(sum[:8]))
}

// addLocked gives wt a worktree: the mirror's spare moved to wt.Path when there is one, else a
// new empty one (addEmptyLocked).
func (m *Manager) addLocked(ctx context.Context, dir string, wt *Worktree, ref string) error {
	sparePath := m.SpareDir(dir)
	if m.recordedGitDir(dir, sparePath) != "" {
		if err := m.removeLocked(ctx, dir, wt.Path); err != nil {
			return fmt.Errorf("remove leftover worktree %s: %w", wt.Name, err)
		}
		if _, err := m.git(ctx, dir, nil, "worktree", "move", sparePath, wt.Path); err == nil {
			if wt.gitDir = m.recordedGitDir(dir, wt.Path); wt.gitDir != "" {
				return nil
			}
		}
		// A spare git cannot move is dropped; the worktree is added afresh.
		if err := m.removeLocked(ctx, dir, sparePath); err != nil {
			return fmt.Errorf("remove the spare worktree: %w", err)
		}
	}
	return m.addEmptyLocked(ctx, dir, wt, ref)
}

// resolve returns the commit a run of co starts from (the remote branch's, or the base's) and
// whether co.Branch is new.
func (m *Manager) resolve(ctx context.Context, p Project, dir string, co Checkout) (sha string, newBranch bool, err error) {
	base := co.Base
	if base == "" {
		base = p.DefaultBranch
	}
	if base == "" {
		return "", false, fmt.Errorf("gitrepo: no base branch for %s (set DefaultBranch)", p.Path)
	}
	if co.Branch != "" {
		if _, err := m.git(ctx, dir, nil, "check-ref-format", "refs/heads/"+co.Branch); err != nil {
			return "", false, fmt.Errorf("gitrepo: invalid branch name %q", co.Branch)
		}
		if sha, ok := m.commitOf(ctx, dir, "refs/remotes/origin/"+co.Branch); ok {
			return sha, false, nil
		}
	}
	sha, ok := m.commitOf(ctx, dir, "refs/remotes/origin/"+base)
	if !ok {
		return "", false, fmt.Errorf("gitrepo: base branch %q not found on the remote of %s", base, p.Path)
	}
	return sha, co.Branch != "", nil
}

// commitOf returns the commit ref points at, and false when ref names no commit.
func (m *Manager) commitOf(ctx context.Context, dir, ref string) (string, bool) {
	sha, err := m.git(ctx, dir, nil, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	return sha, err == nil && sha != ""
}

// recordedGitDir returns the git dir the mirror records for the worktree at path
// (<mirror>/worktrees/<id>, whose gitdir file names <path>/.git), or "" when there is none or
// the directory itself is gone.
func (m *Manager) recordedGitDir(mirror, path string) string {
	return findRecord(filepath.Join(mirror, "worktrees", "*", "gitdir"), path)
}

// recordedGitDirAny is recordedGitDir over every mirror under the data directory.
func (m *Manager) recordedGitDirAny(path string) string {
	return findRecord(filepath.Join(m.cfg.DataDir, "mirrors", "*", "*.git", "worktrees", "*", "gitdir"), path)
}

// findRecord returns the directory of the first gitdir file matching glob that names
// <path>/.git, when path is a directory; otherwise "". The records live in the mirrors, where
// no container writes, so a forged .git in the worktree cannot point elsewhere.
func findRecord(glob, path string) string {
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return ""
	}
	records, _ := filepath.Glob(glob)
	want := filepath.Join(path, ".git")
	for _, rec := range records {
		b, err := os.ReadFile(rec)
		if err == nil && filepath.Clean(strings.TrimSpace(string(b))) == want {
			return filepath.Dir(rec)
		}
	}
	return ""
}

// addEmptyLocked adds wt as a worktree detached at ref with nothing checked out (resetLocked
// checks out the run's commit). A leftover directory of the same path is removed first.
func (m *Manager) addEmptyLocked(ctx context.Context, dir string, wt *Worktree, ref string) error {
	if err := m.removeLocked(ctx, dir, wt.Path); err != nil {
		return fmt.Errorf("remove leftover worktree %s: %w", wt.Name, err)
	}
	if _, err := m.git(ctx, dir, nil, "worktree", "add", "--no-checkout", "--detach", "--quiet", wt.Path, ref); err != nil {
		return fmt.Errorf("add worktree %s: %w", wt.Name, err)
	}
	if wt.gitDir = m.recordedGitDir(dir, wt.Path); wt.gitDir == "" {
		return errors.Join(fmt.Errorf("gitrepo: worktree %s has no record in its mirror", wt.Name), m.removeLocked(ctx, dir, wt.Path))
	}
	return nil
}

// sparseLocked makes wt's sparse checkout match p.Sparse: cone mode on those directories, or
// off (the whole tree) when p.Sparse is empty and the worktree was sparse. It only records the
// patterns; resetLocked's checkout applies them.
func (m *Manager) sparseLocked(ctx context.Context, p Project, wt *Worktree) error {
	patterns := filepath.Join(wt.gitDir, "info", "sparse-checkout")
	if len(p.Sparse) == 0 {
		if _, err := os.Stat(patterns); err != nil {
			return nil
		}
		if _, err := m.gitWT(ctx, wt, nil, "sparse-checkout", "disable"); err != nil {
			return fmt.Errorf("turn off the sparse checkout of %s: %w", wt.Name, err)
		}
		return os.Remove(patterns)
	}
	args := append([]string{"sparse-checkout", "set", "--cone", "--"}, p.Sparse...)
	if _, err := m.gitWT(ctx, wt, nil, args...); err != nil {
		return fmt.Errorf("set the sparse checkout of %s: %w", wt.Name, err)
	}
	return nil
}

// resetLocked makes the worktree exactly commit (a sha, or "HEAD"): it restores the .git link,
// removes what git would block on or run (scrubTree), forgets an unfinished merge, checks the
// commit out (on wt.Branch with -B, or detached) with --force, and removes untracked and
// ignored files. It sets wt.Head.
func (m *Manager) resetLocked(ctx context.Context, wt *Worktree, commit string) error {
	if err := restoreLink(wt); err != nil {
		return err
	}
	if err := scrubTree(ctx, wt); err != nil {
		return fmt.Errorf("remove what git would block on or run in %s: %w", wt.Name, err)
	}
	if commit == "HEAD" {
		sha, err := m.gitWT(ctx, wt, nil, "rev-parse", "HEAD")
		if err != nil {
			return fmt.Errorf("read worktree head: %w", err)
		}
		commit = sha
	}
	if err := m.checkBranchFree(wt); err != nil {
		return err
	}
	// A merge a conflict_resolution run left unfinished (its result refused, or the process
	// stopped) is forgotten: --quit drops MERGE_HEAD and keeps the files, which the forced
	// checkout and the clean below then reset.
	if m.merging(ctx, wt) {
		if _, err := m.gitWT(ctx, wt, nil, "merge", "--quit"); err != nil {
			return fmt.Errorf("forget the unfinished merge in %s: %w", wt.Name, err)
		}
	}
	args := []string{"checkout", "--quiet", "--force", "--no-recurse-submodules"}
	if wt.Branch == "" {
		args = append(args, "--detach", commit)
	} else {
		args = append(args, "-B", wt.Branch, commit)
	}
	if _, err := m.gitWT(ctx, wt, nil, args...); err != nil {
		return fmt.Errorf("check out %s in %s: %w", commit, wt.Name, err)
	}
	// -ff also removes nested repositories; -x the ignored files; .git itself is never touched.
	if _, err := m.gitWT(ctx, wt, nil, "clean", "-ffdxq"); err != nil {
		return fmt.Errorf("clean %s: %w", wt.Name, err)
	}
	wt.Head = commit
	return nil
}

// checkBranchFree returns an error when another worktree of wt's mirror has wt.Branch checked
// out (git checkout -B does not check that, git worktree add does). It reads the HEAD files of
// the mirror's live worktree records.
func (m *Manager) checkBranchFree(wt *Worktree) error {
	if wt.Branch == "" {
		return nil
	}
	heads, _ := filepath.Glob(filepath.Join(wt.mirror, "worktrees", "*", "HEAD"))
	for _, h := range heads {
		if filepath.Dir(h) == wt.gitDir || !liveRecord(filepath.Dir(h)) {
			continue
		}
		if b, err := os.ReadFile(h); err == nil && strings.TrimSpace(string(b)) == "ref: refs/heads/"+wt.Branch {
			return fmt.Errorf("gitrepo: branch %q is checked out in another worktree of %s", wt.Branch, filepath.Base(wt.mirror))
		}
	}
	return nil
}

// liveRecord reports whether the worktree a mirror's record (<mirror>/worktrees/<id>) names
// still exists; a record whose directory is gone waits for git worktree prune.
func liveRecord(gitDir string) bool {
	b, err := os.ReadFile(filepath.Join(gitDir, "gitdir"))
	if err != nil {
		return false
	}
	_, err = os.Stat(strings.TrimSpace(string(b)))
	return err == nil
}

// restoreLink makes <worktree>/.git the regular file "gitdir: <git dir>" git wrote, replacing
// whatever a container left there (a directory, a symlink, another repository's link).
func restoreLink(wt *Worktree) error {
	link := filepath.Join(wt.Path, ".git")
	want := "gitdir: " + wt.gitDir + "\n"
	// Read only a file of the size git wrote: a container may leave any file there (a sparse
	// one of gigabytes).
	if st, err := os.Lstat(link); err == nil && st.Mode().IsRegular() && st.Size() == int64(len(want)) {
		if b, err := os.ReadFile(link); err == nil && string(b) == want {
			return nil
		}
	}
	if err := os.RemoveAll(link); err != nil {
		return fmt.Errorf("remove the worktree's .git: %w", err)
	}
	if err := os.WriteFile(link, []byte(want), 0o644); err != nil {
		return fmt.Errorf("restore the worktree's .git: %w", err)
	}
	return nil
}

// partialLocked marks the mirror's origin as a promisor remote with the blob:none filter, so
// that git fetches missing blobs from it on demand (checkout, diff). A mirror already marked
// is left as it is.
func (m *Manager) partialLocked(ctx context.Context, dir string) error {
	if conf, err := os.ReadFile(filepath.Join(dir, "config")); err == nil &&
		strings.Contains(string(conf), "\tpromisor = true\n") && strings.Contains(string(conf), "\tpartialclonefilter = blob:none\n") {
		return nil
	}
	for _, kv := range [][2]string{{"remote.origin.promisor", "true"}, {"remote.origin.partialclonefilter", "blob:none"}} {
		if _, err := m.git(ctx, dir, nil, "config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}
