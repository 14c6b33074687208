package gitrepo

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkWorktree measures the worktree preparation of a run on a small generated repository
// (10 commits, 10 files) and a large one (10,000 commits, 3,000 files), the mirror already
// fetched, as a run of the development phase does it (a branch, chowned to the container user
// when running as root):
//
//   - add: AddWorktree, a fresh worktree per run (removal excluded from the time);
//   - first-cold: Prepare for a mailbox that has no worktree yet, the project having no spare
//     worktree (the first mailbox of a project): a checkout of every file;
//   - first: the same when the project has a spare (Warm, or an earlier mailbox's Retire);
//   - later: Prepare again for the same mailbox, after its previous run changed a tracked file,
//     deleted one, and wrote an untracked and an ignored file (that mess excluded from the time).
//
// ms/op is per preparation; compare large against small for each.
func BenchmarkWorktree(b *testing.B) {
	for _, shape := range []repoShape{smallRepo, largeRepo} {
		b.Run(shape.Name, func(b *testing.B) {
			root := b.TempDir()
			remote := generateRepo(b, root, shape)
			cfg := Config{DataDir: filepath.Join(root, "data"), AuthorName: "Alfred", AuthorEmail: "a@example.com"}
			if os.Geteuid() == 0 {
				cfg.UID, cfg.GID = 65532, 65532
			}
			mgr, err := New(cfg)
			require.NoError(b, err)
			p := Project{Forge: "gitlab", Path: "bench/" + shape.Name, CloneURL: remote, DefaultBranch: "main"}
			_, err = mgr.Sync(b.Context(), p)
			require.NoError(b, err)
			co := Checkout{Branch: "agent/issue-1-bench"}
			n := 0
			b.Run("add", func(b *testing.B) {
				for b.Loop() {
					n++
					wt, err := mgr.AddWorktree(b.Context(), p, fmt.Sprintf("alfred-mbx1-r%d-development-a1", n), co)
					require.NoError(b, err)
					b.StopTimer()
					require.NoError(b, mgr.RemoveWorktree(b.Context(), wt))
					b.StartTimer()
				}
			})
			b.Run("first-cold", func(b *testing.B) {
				for b.Loop() {
					n++
					wt, err := mgr.Prepare(b.Context(), p, fmt.Sprintf("alfred-mbx%d-worktree", n), co)
					require.NoError(b, err)
					b.StopTimer()
					require.NoError(b, mgr.RemoveWorktree(b.Context(), wt))
					b.StartTimer()
				}
			})
			b.Run("first", func(b *testing.B) {
				require.NoError(b, mgr.Warm(b.Context(), p))
				for b.Loop() {
					n++
					key := fmt.Sprintf("alfred-mbx%d-worktree", n)
					_, err := mgr.Prepare(b.Context(), p, key, co)
					require.NoError(b, err)
					b.StopTimer()
					require.NoError(b, mgr.Retire(b.Context(), key))
					b.StartTimer()
				}
			})
			b.Run("later", func(b *testing.B) {
				key := "alfred-mbx0-worktree"
				wt, err := mgr.Prepare(b.Context(), p, key, co)
				require.NoError(b, err)
				for b.Loop() {
					b.StopTimer()
					dirty(b, wt.Path, shape)
					b.StartTimer()
					_, err := mgr.Prepare(b.Context(), p, key, co)
					require.NoError(b, err)
				}
				b.StopTimer()
				require.NoError(b, mgr.Retire(b.Context(), key))
			})
		})
	}
}

// dirty does to a worktree what a run's container may: change and delete tracked files, write
// untracked files (in a new directory too) and a file the repository ignores.
func dirty(tb testing.TB, path string, shape repoShape) {
	tb.Helper()
	require.NoError(tb, os.WriteFile(filepath.Join(path, fileName(0)), []byte("changed\n"), 0o644))
	require.NoError(tb, os.Remove(filepath.Join(path, fileName(shape.Files-1))))
	require.NoError(tb, os.MkdirAll(filepath.Join(path, "new", "dir"), 0o755))
	require.NoError(tb, os.WriteFile(filepath.Join(path, "new", "dir", "untracked.txt"), []byte("u\n"), 0o644))
	require.NoError(tb, os.WriteFile(filepath.Join(path, "build.log"), []byte("ignored\n"), 0o644))
	require.NoError(tb, os.MkdirAll(filepath.Join(path, "node_modules", "pkg"), 0o755))
	require.NoError(tb, os.WriteFile(filepath.Join(path, "node_modules", "pkg", "index.js"), []byte("ignored\n"), 0o644))
}
