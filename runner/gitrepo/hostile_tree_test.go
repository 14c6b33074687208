package gitrepo

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/runfile"
)

// A nested repository the agent left (git init in a directory of the worktree, or a submodule
// it populated) is refused before git looks at it: git would commit it as a link to a commit
// nobody can fetch, and, once the branch has that link, run the nested repository's own
// configuration (core.fsmonitor: any command) as Alfred when it checks whether it changed.
func TestCommitRefusesANestedRepository(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AuthorName: "Alfred", AuthorEmail: "alfred@example.org"})
	wt, err := b.mgr.Prepare(t.Context(), b.proj, "alfred-mbx1-worktree", Checkout{Branch: "agent/issue-1"})
	require.NoError(t, err)
	sub := filepath.Join(wt.Path, "vendor", "sub")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	run(t, sub, "init", "--quiet")
	require.NoError(t, os.WriteFile(filepath.Join(sub, "x"), []byte("x\n"), 0o644))
	run(t, sub, "add", "x")
	run(t, sub, "commit", "--quiet", "-m", "nested")
	pwned := filepath.Join(t.TempDir(), "pwned")
	run(t, sub, "config", "core.fsmonitor", "touch "+pwned+"; false")

	for range 2 { // the second would find the link the first committed
		_, err = b.mgr.Commit(t.Context(), wt, "Agent: a nested repository")
		require.ErrorIs(t, err, runfile.ErrRefused)
		require.Equal(t, runfile.ReasonNestedRepository, runfile.Reason(err))
		require.Contains(t, err.Error(), "vendor/sub/.git")
		require.NoError(t, os.WriteFile(filepath.Join(sub, "x"), []byte("changed\n"), 0o644))
	}
	require.NoFileExists(t, pwned, "git ran the nested repository's command")
	require.Equal(t, b.mainSHA, run(t, wt.Path, "--git-dir="+wt.gitDir, "rev-parse", "HEAD"), "nothing committed")
}

// A FIFO git would open while it looks for changes blocks git for ever: a nested repository's
// HEAD, a directory's .gitignore. Commit refuses it at once (not_regular, naming it), wherever
// it is, without running git on it; the next Prepare removes it and resets the worktree
// without blocking either.
func TestCommitRefusesAFIFOGitWouldOpen(t *testing.T) {
	t.Parallel()
	for name, layout := range map[string]func(t *testing.T, wt string) string{
		"nested HEAD": func(t *testing.T, wt string) string {
			for _, d := range []string{"x/.git/objects", "x/.git/refs"} {
				require.NoError(t, os.MkdirAll(filepath.Join(wt, d), 0o755))
			}
			require.NoError(t, syscall.Mkfifo(filepath.Join(wt, "x/.git/HEAD"), 0o644))
			return "x/.git"
		},
		"gitignore": func(t *testing.T, wt string) string {
			require.NoError(t, os.MkdirAll(filepath.Join(wt, "docs"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(wt, "docs", "a.md"), []byte("a\n"), 0o644))
			require.NoError(t, syscall.Mkfifo(filepath.Join(wt, "docs", ".gitignore"), 0o644))
			return "docs/.gitignore"
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Config{AuthorName: "Alfred", AuthorEmail: "alfred@example.org"})
			wt, err := b.mgr.Prepare(t.Context(), b.proj, "alfred-mbx1-worktree", Checkout{Branch: "agent/issue-1"})
			require.NoError(t, err)
			refused := layout(t, wt.Path)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			_, err = b.mgr.Commit(ctx, wt, "Agent: a FIFO")
			require.NoError(t, ctx.Err(), "refused before git blocked on it")
			require.ErrorIs(t, err, runfile.ErrRefused)
			require.Contains(t, err.Error(), refused)

			wt, err = b.mgr.Prepare(ctx, b.proj, "alfred-mbx1-worktree", Checkout{Branch: "agent/issue-1"})
			require.NoError(t, ctx.Err(), "the reset did not block on it")
			require.NoError(t, err)
			_, err = os.Lstat(filepath.Join(wt.Path, refused))
			require.ErrorIs(t, err, os.ErrNotExist)
			require.FileExists(t, filepath.Join(wt.Path, "README"))
		})
	}
}

// A nested repository in a directory the repository ignores (a tool's checkout of a
// dependency, pip's src/) is not the branch's business: git neither stages nor looks into it,
// so the commit goes on without it.
func TestCommitIgnoresANestedRepositoryInAnIgnoredDirectory(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AuthorName: "Alfred", AuthorEmail: "alfred@example.org"})
	wt, err := b.mgr.Prepare(t.Context(), b.proj, "alfred-mbx1-worktree", Checkout{Branch: "agent/issue-1"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, ".gitignore"), []byte("/deps/\n"), 0o644))
	dep := filepath.Join(wt.Path, "deps", "lib")
	require.NoError(t, os.MkdirAll(dep, 0o755))
	run(t, dep, "init", "--quiet")
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "main.go"), []byte("package main\n"), 0o644))
	sha, err := b.mgr.Commit(t.Context(), wt, "Agent: code beside an ignored checkout")
	require.NoError(t, err)
	require.NotEmpty(t, sha)
	files := run(t, wt.Path, "--git-dir="+wt.gitDir, "ls-tree", "-r", "--name-only", "HEAD")
	require.Contains(t, files, "main.go")
	require.NotContains(t, files, "deps")
}
