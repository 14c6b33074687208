package gitrepo

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchRepo is one generated repository with its Manager, the mirror fetched.
type benchRepo struct {
	shape repoShape
	mgr   *Manager
	p     Project
	n     int // worktrees made so far, for fresh names
	took  []time.Duration
}

func newBenchRepo(b *testing.B, shape repoShape) *benchRepo {
	root := b.TempDir()
	remote := generateRepo(b, root, shape)
	cfg := ownedConfig()
	cfg.DataDir, cfg.AuthorName, cfg.AuthorEmail = filepath.Join(root, "data"), "Alfred", "a@example.com"
	mgr, err := New(cfg)
	require.NoError(b, err)
	p := Project{Forge: "gitlab", Path: "bench/" + shape.Name, CloneURL: remote, DefaultBranch: "main"}
	_, err = mgr.Sync(b.Context(), p)
	require.NoError(b, err)
	return &benchRepo{shape: shape, mgr: mgr, p: p}
}

// timed runs prepare (timed) and then after (not timed) on r.
func (r *benchRepo) timed(b *testing.B, prepare func() *Worktree, after func(*Worktree)) {
	start := time.Now()
	wt := prepare()
	r.took = append(r.took, time.Since(start))
	if after != nil {
		after(wt)
	}
}

func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

// BenchmarkWorktree measures the worktree preparation of a run, the mirror already fetched, on
// a small generated repository (10 commits, 10 files) and a large one (10,000 commits, 3,000
// files) side by side: every iteration prepares one worktree of each, so both see the same load
// of the machine. Runs are on a branch, as a development run's, and chowned to the container
// user when running as root. Modes:
//
//   - add: AddWorktree, a fresh worktree per run (removal not timed);
//   - first-cold: Prepare for a mailbox that has no worktree yet, the project having no spare
//     worktree (the first mailbox of a project): a checkout of every file;
//   - first: the same when the project has a spare (Warm, or an earlier mailbox's Retire);
//   - later: Prepare again for the same mailbox, after its previous run changed a tracked file,
//     deleted one, and wrote untracked and ignored files (that mess not timed).
//
// Reported: small-ms and large-ms, the median preparation time of each, and ratio =
// large-ms / small-ms.
func BenchmarkWorktree(b *testing.B) {
	small, large := newBenchRepo(b, smallRepo), newBenchRepo(b, largeRepo)
	repos := []*benchRepo{small, large}
	co := Checkout{Branch: "agent/issue-1-bench"}
	modes := []struct {
		name  string
		setup func(b *testing.B, r *benchRepo)
		once  func(b *testing.B, r *benchRepo)
	}{
		{name: "add", once: func(b *testing.B, r *benchRepo) {
			r.n++
			r.timed(b, func() *Worktree {
				wt, err := r.mgr.AddWorktree(b.Context(), r.p, fmt.Sprintf("alfred-mbx1-r%d-development-a1", r.n), co)
				require.NoError(b, err)
				return wt
			}, func(wt *Worktree) { require.NoError(b, r.mgr.RemoveWorktree(b.Context(), wt)) })
		}},
		{name: "first-cold", once: func(b *testing.B, r *benchRepo) {
			r.n++
			r.timed(b, func() *Worktree {
				wt, err := r.mgr.Prepare(b.Context(), r.p, fmt.Sprintf("alfred-mbx%d-worktree", r.n), co)
				require.NoError(b, err)
				return wt
			}, func(wt *Worktree) { require.NoError(b, r.mgr.RemoveWorktree(b.Context(), wt)) })
		}},
		{name: "first", setup: func(b *testing.B, r *benchRepo) {
			require.NoError(b, r.mgr.Warm(b.Context(), r.p))
		}, once: func(b *testing.B, r *benchRepo) {
			r.n++
			key := fmt.Sprintf("alfred-mbx%d-worktree", r.n)
			r.timed(b, func() *Worktree {
				wt, err := r.mgr.Prepare(b.Context(), r.p, key, co)
				require.NoError(b, err)
				return wt
			}, func(*Worktree) { require.NoError(b, r.mgr.Retire(b.Context(), key)) })
		}},
		{name: "later", setup: func(b *testing.B, r *benchRepo) {
			_, err := r.mgr.Prepare(b.Context(), r.p, "alfred-mbx0-worktree", co)
			require.NoError(b, err)
		}, once: func(b *testing.B, r *benchRepo) {
			dirty(b, r.mgr.WorktreeDir("alfred-mbx0-worktree"), r.shape)
			r.timed(b, func() *Worktree {
				wt, err := r.mgr.Prepare(b.Context(), r.p, "alfred-mbx0-worktree", co)
				require.NoError(b, err)
				return wt
			}, nil)
		}},
	}
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			for _, r := range repos {
				r.took = nil
				if mode.setup != nil {
					mode.setup(b, r)
				}
			}
			for b.Loop() {
				for _, r := range repos {
					mode.once(b, r)
				}
			}
			b.ReportMetric(median(small.took), "small-ms")
			b.ReportMetric(median(large.took), "large-ms")
			b.ReportMetric(median(large.took)/median(small.took), "ratio")
		})
	}
}

// dirty does to a worktree what a run's container may: change and delete tracked files, write
// untracked files (in a new directory too) and files the repository ignores.
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
