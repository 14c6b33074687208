package gitrepo

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Worktrees are checked out by root and handed to the container user (Config.UID); this file
// holds that hand-over.

// ownedMark is the file in a worktree's git dir (where no container writes) that says the
// last Prepare gave every entry of the worktree to the container user.
const ownedMark = "alfred-owned"

// takeMark removes wt's ownedMark before anything in the worktree changes and returns since
// when it was there (the previous preparation gave every entry to the container user), the
// zero time otherwise.
func takeMark(wt *Worktree, since time.Time) (time.Time, error) {
	mark := filepath.Join(wt.gitDir, ownedMark)
	if _, err := os.Stat(mark); err != nil {
		return time.Time{}, nil
	}
	if err := os.Remove(mark); err != nil {
		return time.Time{}, fmt.Errorf("reset the ownership mark of %s: %w", wt.Name, err)
	}
	return since, nil
}

// ownLocked, when running as root with Config.UID set, gives UID:GID every entry of wt not
// already theirs and then updates the index entries of the files among them (a chown changes a
// file's ctime, and a file whose stat data differs from the index is rewritten by the next
// checkout). After resetLocked every file in the worktree is tracked, so every such file has an
// index entry.
//
// With a non-zero since (takeMark found the previous preparation complete), only directories
// modified at or after since are searched: git writes a file by creating a new directory
// entry, and what the container created is the container user's already. Otherwise the whole
// tree is. It writes ownedMark when done.
func (m *Manager) ownLocked(ctx context.Context, wt *Worktree, since time.Time) error {
	if os.Geteuid() != 0 || m.cfg.UID <= 0 {
		return nil
	}
	files, err := chownChanged(wt.Path, since, m.cfg.UID, m.cfg.GID)
	if err != nil {
		return fmt.Errorf("chown worktree %s: %w", wt.Name, err)
	}
	if len(files) > 0 {
		stdin := []byte(strings.Join(files, "\x00") + "\x00")
		if _, err := m.gitWT(ctx, wt, stdin, "update-index", "-q", "-z", "--stdin"); err != nil {
			return fmt.Errorf("update the index of %s: %w", wt.Name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(wt.gitDir, ownedMark), nil, 0o644); err != nil {
		return fmt.Errorf("mark the ownership of %s: %w", wt.Name, err)
	}
	return nil
}

// chownChanged gives uid:gid every entry under root that does not already have them (symlinks
// themselves, not their targets), looking only at the entries of directories modified at or
// after since (every directory when since is zero), and returns the paths, relative to root and
// slash-separated, of the non-directories among them other than the .git link.
func chownChanged(root string, since time.Time, uid, gid int) ([]string, error) {
	var files []string
	owned := func(info fs.FileInfo) bool {
		st, ok := info.Sys().(*syscall.Stat_t)
		return ok && int(st.Uid) == uid && int(st.Gid) == gid
	}
	var walk func(dir string, info fs.FileInfo) error
	walk = func(dir string, info fs.FileInfo) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		changed := !info.ModTime().Before(since)
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if !changed && !e.IsDir() {
				continue
			}
			ei, err := e.Info()
			if err != nil {
				return err
			}
			if changed && !owned(ei) {
				if err := os.Lchown(p, uid, gid); err != nil {
					return err
				}
				if rel, _ := filepath.Rel(root, p); !e.IsDir() && rel != ".git" {
					files = append(files, filepath.ToSlash(rel))
				}
			}
			if e.IsDir() {
				if err := walk(p, ei); err != nil {
					return err
				}
			}
		}
		return nil
	}
	info, err := os.Lstat(root)
	if err != nil {
		return nil, err
	}
	if !owned(info) {
		if err := os.Lchown(root, uid, gid); err != nil {
			return nil, err
		}
	}
	return files, walk(root, info)
}

// chownTree changes the owner of path and everything below it (symlinks themselves, not their
// targets).
func chownTree(path string, uid, gid int) error {
	return filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}
