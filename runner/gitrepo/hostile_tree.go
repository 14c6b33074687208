package gitrepo

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/alfred-bot/alfred/internal/base/runfile"
)

// blocking are the file types git may open while it looks at a worktree (a directory's
// .gitignore, a nested repository's HEAD) and block on for ever: a FIFO waits for a writer, a
// device for whatever it serves. A socket fails to open at once, so git reports it.
const blocking = fs.ModeNamedPipe | fs.ModeDevice | fs.ModeCharDevice

// treeRefusal walks wt (the run has ended: nothing changes it meanwhile; filepath.WalkDir never
// follows a link) and returns a *runfile.RefusedError for the first entry git must not meet,
// nil when there is none:
//   - a FIFO or a device anywhere (runfile.ReasonNotRegular), even ignored: git opens some
//     files it does not stage;
//   - a .git below the root (runfile.ReasonNestedRepository) that git would see, i.e. not in a
//     directory the repository ignores (git check-ignore, asked once no FIFO is left for it to
//     open): git would stage the nested repository as a link to a commit nobody can fetch and,
//     once the branch has that link, run the nested repository's own configuration
//     (core.fsmonitor is a command) as Alfred, without the settings Alfred gives its own git.
//
// The worktree's own .git (a file git wrote, restored by every Prepare) is not walked. A
// cancelled ctx ends the walk with no refusal.
func (m *Manager) treeRefusal(ctx context.Context, wt *Worktree) *runfile.RefusedError {
	var nested []*runfile.RefusedError
	var blocked *runfile.RefusedError
	walkHostile(ctx, wt, func(re *runfile.RefusedError) bool {
		if re.Reason != runfile.ReasonNestedRepository {
			blocked = re
			return false
		}
		nested = append(nested, re)
		return true
	})
	if blocked != nil || len(nested) == 0 {
		return blocked
	}
	// The directories that hold a .git, asked of git: an ignored one is none of the branch's.
	var dirs strings.Builder
	for _, re := range nested {
		dirs.WriteString(path.Dir(re.Name) + "\x00")
	}
	out, err := m.gitWT(ctx, wt, []byte(dirs.String()), "check-ignore", "--stdin", "-z")
	if err != nil && !isExit(err, 1) { // 1: none is ignored
		return nested[0]
	}
	ignored := map[string]bool{}
	for _, d := range strings.Split(out, "\x00") {
		ignored[strings.TrimSuffix(d, "/")] = true
	}
	for _, re := range nested {
		if !ignored[path.Dir(re.Name)] {
			return re
		}
	}
	return nil
}

// scrubTree removes from wt everything treeRefusal refuses, so that the git calls that reset it
// (checkout, clean) never meet them: FIFOs and devices, and nested .git entries with all they
// hold (os.RemoveAll, which follows no link). The worktree's own .git is kept. Errors: a
// removal that failed, ctx's.
func scrubTree(ctx context.Context, wt *Worktree) error {
	var errs []error
	walkHostile(ctx, wt, func(re *runfile.RefusedError) bool {
		if err := os.RemoveAll(filepath.Join(wt.Path, filepath.FromSlash(re.Name))); err != nil {
			errs = append(errs, err)
		}
		return true
	})
	return errors.Join(append(errs, ctx.Err())...)
}

// walkHostile walks wt and calls visit with each entry treeRefusal refuses (not descending into
// a nested .git), until visit returns false or ctx is cancelled.
func walkHostile(ctx context.Context, wt *Worktree, visit func(*runfile.RefusedError) bool) {
	_ = filepath.WalkDir(wt.Path, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || p == wt.Path {
			return nil // unreadable: left to git, which reports it
		}
		rel, _ := filepath.Rel(wt.Path, p)
		var re *runfile.RefusedError
		switch {
		case rel == ".git":
		case d.Name() == ".git":
			re = &runfile.RefusedError{Name: filepath.ToSlash(rel), Reason: runfile.ReasonNestedRepository,
				Detail: "it makes its directory a repository of its own inside the worktree: git would commit it as a link to a commit nobody can fetch, and run its configuration as Alfred"}
		case d.Type()&blocking != 0:
			re = &runfile.RefusedError{Name: filepath.ToSlash(rel), Reason: runfile.ReasonNotRegular,
				Detail: "it is a FIFO or a device, which git would block on"}
		}
		if re != nil && !visit(re) {
			return fs.SkipAll
		}
		if d.Name() == ".git" && d.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
}
