package gitrepo

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// ownedConfig is a Config that gives worktrees to the container user 65532 when the test runs
// as root (as Alfred does), and an empty one otherwise.
func ownedConfig() Config {
	if os.Geteuid() == 0 {
		return Config{UID: 65532, GID: 65532}
	}
	return Config{}
}

// generated sets up a Manager over a generated remote of 90 files in d000, d001 and d002.
func generated(t *testing.T, cfg Config) (*Manager, Project, string) {
	t.Helper()
	root := t.TempDir()
	remote := generateRepo(t, root, repoShape{Name: "gen", Commits: 5, Files: 90})
	cfg.DataDir = filepath.Join(root, "data")
	cfg.UID, cfg.GID = ownedConfig().UID, ownedConfig().GID
	cfg.AuthorName, cfg.AuthorEmail = "Alfred", "alfred@example.com"
	mgr, err := New(cfg)
	require.NoError(t, err)
	return mgr, Project{Forge: "gitlab", Path: "g/gen", CloneURL: remote, DefaultBranch: "main"}, remote
}

// Nothing a container writes survives into the next run of the mailbox: tracked changes and
// deletions are undone, untracked and ignored files and nested repositories are removed, and a
// replaced .git is restored.
func TestPrepareResetsWhatTheContainerWrote(t *testing.T) {
	t.Parallel()
	cfg := ownedConfig()
	mgr, p, remote := generated(t, cfg)
	ctx := t.Context()
	co := Checkout{Branch: "agent/issue-3-reuse"}
	wt, err := mgr.Prepare(ctx, p, "alfred-mbx3-worktree", co)
	require.NoError(t, err)
	require.True(t, wt.NewBranch)
	require.Equal(t, run(t, remote, "rev-parse", "main"), wt.Head)
	require.Equal(t, mgr.WorktreeDir("alfred-mbx3-worktree"), wt.Path)
	link, err := os.ReadFile(filepath.Join(wt.Path, ".git"))
	require.NoError(t, err)

	inode := func(rel string) uint64 {
		st, err := os.Lstat(filepath.Join(wt.Path, rel))
		require.NoError(t, err)
		return st.Sys().(*syscall.Stat_t).Ino
	}
	untouched := inode(fileName(5))

	dirty(t, wt.Path, repoShape{Files: 90})
	nested := filepath.Join(wt.Path, "vendor", "lib")
	require.NoError(t, os.MkdirAll(nested, 0o755))
	run(t, nested, "init", "--quiet")
	require.NoError(t, os.Remove(filepath.Join(wt.Path, ".git")))
	require.NoError(t, os.Mkdir(filepath.Join(wt.Path, ".git"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, ".git", "config"), []byte("[core]\n"), 0o644))

	wt2, err := mgr.Prepare(ctx, p, "alfred-mbx3-worktree", co)
	require.NoError(t, err)
	require.Equal(t, wt.Path, wt2.Path)
	got, err := os.ReadFile(filepath.Join(wt.Path, fileName(0)))
	require.NoError(t, err)
	require.Contains(t, string(got), "file 0 revision 0")
	require.FileExists(t, filepath.Join(wt.Path, fileName(89)), "a deleted tracked file is restored")
	for _, gone := range []string{"new", "build.log", "node_modules", "vendor"} {
		require.NoFileExists(t, filepath.Join(wt.Path, gone))
		require.NoDirExists(t, filepath.Join(wt.Path, gone))
	}
	restored, err := os.ReadFile(filepath.Join(wt.Path, ".git"))
	require.NoError(t, err)
	require.Equal(t, string(link), string(restored))
	require.Empty(t, run(t, wt.Path, "status", "--porcelain", "--ignored"))
	require.Equal(t, untouched, inode(fileName(5)), "a file nobody touched is not rewritten")
	_, err = mgr.Prepare(ctx, p, "alfred-mbx3-worktree", co)
	require.NoError(t, err)
	require.Equal(t, untouched, inode(fileName(5)))
	if cfg.UID != 0 {
		st, err := os.Stat(filepath.Join(wt.Path, fileName(0)))
		require.NoError(t, err)
		require.EqualValues(t, 65532, st.Sys().(*syscall.Stat_t).Uid)
	}

	// A commit pushed by the run, then one by a human: the next run starts at the remote's.
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "agent.txt"), []byte("a\n"), 0o644))
	sha, err := mgr.Commit(ctx, wt2, "agent")
	require.NoError(t, err)
	require.NoError(t, mgr.Push(ctx, wt2))
	other := filepath.Join(t.TempDir(), "other")
	run(t, "/", "clone", "--quiet", "--branch", co.Branch, remote, other)
	require.NoError(t, os.WriteFile(filepath.Join(other, "human.txt"), []byte("h\n"), 0o644))
	run(t, other, "add", ".")
	run(t, other, "commit", "--quiet", "-m", "human")
	run(t, other, "push", "--quiet", "origin", "HEAD")
	wt3, err := mgr.Prepare(ctx, p, "alfred-mbx3-worktree", co)
	require.NoError(t, err)
	require.False(t, wt3.NewBranch)
	require.Equal(t, run(t, other, "rev-parse", "HEAD"), wt3.Head)
	require.NotEqual(t, sha, wt3.Head)
	require.FileExists(t, filepath.Join(wt.Path, "human.txt"))
	require.FileExists(t, filepath.Join(wt.Path, "agent.txt"))

	// A read-only run of the same mailbox is detached at the base; the branch is free again.
	wt4, err := mgr.Prepare(ctx, p, "alfred-mbx3-worktree", Checkout{})
	require.NoError(t, err)
	require.Empty(t, wt4.Branch)
	require.NoFileExists(t, filepath.Join(wt.Path, "human.txt"))
	require.Equal(t, run(t, remote, "rev-parse", "main"), wt4.Head)
}

// Retire keeps the first retired worktree as the project's spare (clean, detached, its branch
// released) and removes the others; the next new mailbox's first run takes the spare.
func TestRetireAndSpare(t *testing.T) {
	t.Parallel()
	cfg := ownedConfig()
	mgr, p, remote := generated(t, cfg)
	ctx := t.Context()
	a, err := mgr.Prepare(ctx, p, "alfred-mbx1-worktree", Checkout{Branch: "agent/issue-1"})
	require.NoError(t, err)
	b, err := mgr.Prepare(ctx, p, "alfred-mbx2-worktree", Checkout{Branch: "agent/issue-2"})
	require.NoError(t, err)
	_, err = mgr.Prepare(ctx, p, "alfred-mbx9-worktree", Checkout{Branch: "agent/issue-1"})
	require.Error(t, err, "a branch is held by its mailbox's worktree between runs")
	require.NoError(t, os.WriteFile(filepath.Join(a.Path, "secret.log"), []byte("s\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(a.Path, fileName(7)), []byte("changed\n"), 0o644))

	require.NoError(t, mgr.Retire(ctx, "alfred-mbx1-worktree"))
	require.NoDirExists(t, a.Path)
	mirror, _ := mgr.MirrorDir(p)
	spare := mgr.SpareDir(mirror)
	require.DirExists(t, spare)
	require.NoFileExists(t, filepath.Join(spare, "secret.log"), "retiring cleans what the container wrote")
	require.NoError(t, mgr.Retire(ctx, "alfred-mbx2-worktree"))
	require.NoDirExists(t, b.Path)
	require.NoError(t, mgr.Retire(ctx, "alfred-mbx2-worktree"), "retiring twice")
	list := run(t, mirror, "worktree", "list", "--porcelain")
	require.NotContains(t, list, a.Path)
	require.NotContains(t, list, b.Path)

	c, err := mgr.Prepare(ctx, p, "alfred-mbx4-worktree", Checkout{Branch: "agent/issue-1"})
	require.NoError(t, err, "the retired mailbox's branch is free")
	require.NoDirExists(t, spare, "the new mailbox took the spare")
	require.Equal(t, run(t, remote, "rev-parse", "main"), c.Head)
	require.FileExists(t, filepath.Join(c.Path, fileName(42)))
	require.Empty(t, run(t, c.Path, "status", "--porcelain", "--ignored"))
	if cfg.UID != 0 {
		st, err := os.Stat(filepath.Join(c.Path, fileName(7)))
		require.NoError(t, err)
		require.EqualValues(t, 65532, st.Sys().(*syscall.Stat_t).Uid, "what the retirement rewrote is the container user's")
	}

	require.NoError(t, mgr.Warm(ctx, p))
	require.DirExists(t, spare)
	require.FileExists(t, filepath.Join(spare, fileName(42)))
	require.NoError(t, mgr.Warm(ctx, p), "warming twice")

	// The orphan sweep removes kept worktrees it is told to; Prepare adds them again.
	removed, err := mgr.Sweep(ctx, func(name string) bool { return name != "alfred-mbx4-worktree" })
	require.NoError(t, err)
	require.Equal(t, []string{"alfred-mbx4-worktree"}, removed)
	again, err := mgr.Prepare(ctx, p, "alfred-mbx4-worktree", Checkout{Branch: "agent/issue-1"})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(again.Path, fileName(42)))
}

// A project with sparse directories and a partial-clone mirror (set in Config.Projects) checks
// out, and fetches the contents of, only the files it asks for.
func TestPrepareSparsePartial(t *testing.T) {
	t.Parallel()
	cfg := Config{Projects: map[string]ProjectSettings{"g/gen": {Sparse: []string{"d001"}, PartialClone: true}}}
	mgr, p, remote := generated(t, cfg)
	ctx := t.Context()
	run(t, remote, "config", "uploadpack.allowFilter", "true")
	p.CloneURL = "file://" + remote
	wt, err := mgr.Prepare(ctx, p, "alfred-mbx5-worktree", Checkout{Branch: "agent/issue-5"})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(wt.Path, ".gitignore"), "files at the root are always checked out")
	require.FileExists(t, filepath.Join(wt.Path, fileName(30)))
	require.FileExists(t, filepath.Join(wt.Path, fileName(59)))
	require.NoDirExists(t, filepath.Join(wt.Path, "d000"))
	require.NoDirExists(t, filepath.Join(wt.Path, "d002"))

	mirror, _ := mgr.MirrorDir(p)
	missing := run(t, mirror, "rev-list", "--objects", "--all", "--missing=print")
	n := strings.Count(missing, "\n?")
	require.GreaterOrEqual(t, n, 60, "the blobs of d000 and d002 were never fetched")

	// A file the container writes outside the sparse directories does not survive either; the
	// mirror, already a partial clone, is not configured again.
	require.NoError(t, os.MkdirAll(filepath.Join(wt.Path, "d002"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, fileName(61)), []byte("x\n"), 0o644))
	var configs int
	mgr.trace = func(args []string) {
		if args[0] == "config" {
			configs++
		}
	}
	_, err = mgr.Prepare(ctx, p, "alfred-mbx5-worktree", Checkout{Branch: "agent/issue-5"})
	require.NoError(t, err)
	mgr.trace = nil
	require.Zero(t, configs)
	require.NoDirExists(t, filepath.Join(wt.Path, "d002"))

	// Without the setting, the same worktree holds the whole tree again.
	whole, err := New(Config{DataDir: mgr.cfg.DataDir})
	require.NoError(t, err)
	_, err = whole.Prepare(ctx, p, "alfred-mbx5-worktree", Checkout{Branch: "agent/issue-5"})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(wt.Path, fileName(0)))
	require.FileExists(t, filepath.Join(wt.Path, fileName(89)))
}

// Warm and Retire racing for the one spare leave exactly one, registered and usable.
func TestWarmAndRetireRace(t *testing.T) {
	t.Parallel()
	mgr, p, _ := generated(t, Config{})
	ctx := t.Context()
	mirror, _ := mgr.MirrorDir(p)
	for i := range 4 {
		key := "alfred-mbx" + string(rune('1'+i)) + "-worktree"
		_, err := mgr.Prepare(ctx, p, key, Checkout{Branch: "agent/race"})
		require.NoError(t, err)
		// A new mailbox takes the spare, if any, so both calls below have a spare to make.
		taker := "alfred-mbx9" + string(rune('1'+i)) + "-worktree"
		_, err = mgr.Prepare(ctx, p, taker, Checkout{})
		require.NoError(t, err)
		errs := make(chan error, 2)
		go func() { errs <- mgr.Warm(ctx, p) }()
		go func() { errs <- mgr.Retire(ctx, key) }()
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)
		require.NoError(t, mgr.Retire(ctx, taker))
		spares, err := os.ReadDir(filepath.Join(mgr.cfg.DataDir, "spares"))
		require.NoError(t, err)
		require.Len(t, spares, 1)
		require.Equal(t, filepath.Base(mgr.SpareDir(mirror)), spares[0].Name())
		require.NotContains(t, run(t, mirror, "worktree", "list", "--porcelain"), "prunable")
	}
	wt, err := mgr.Prepare(ctx, p, "alfred-mbx99-worktree", Checkout{Branch: "agent/race"})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(wt.Path, fileName(42)))
}
