package gitrepo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/runfile"
)

// mergeSetup pushes branch agent/x (README "agent") and then a change on main: to README when
// conflict, else to another file.
func mergeSetup(t *testing.T, conflict bool) (*testBundle, *Worktree, string) {
	t.Helper()
	b := setup(t, Config{})
	work := filepath.Join(t.TempDir(), "work")
	run(t, filepath.Dir(work), "clone", "--quiet", b.remote, work)
	run(t, work, "checkout", "--quiet", "-b", "agent/x")
	require.NoError(t, os.WriteFile(filepath.Join(work, "README"), []byte("hello agent\n"), 0o644))
	run(t, work, "commit", "--quiet", "-am", "Agent: greet the agent")
	run(t, work, "push", "--quiet", "origin", "agent/x")
	run(t, work, "checkout", "--quiet", "main")
	file := "OTHER"
	if conflict {
		file = "README"
	}
	require.NoError(t, os.WriteFile(filepath.Join(work, file), []byte("hello main\n"), 0o644))
	run(t, work, "add", ".")
	run(t, work, "commit", "--quiet", "-m", "Main: greet main")
	run(t, work, "push", "--quiet", "origin", "main")
	wt, err := b.mgr.AddWorktree(t.Context(), b.proj, "mbx1-conflict_resolution-a1", Checkout{Branch: "agent/x"})
	require.NoError(t, err)
	return b, wt, run(t, work, "rev-parse", "HEAD")
}

func TestMergeTargetWithoutConflict(t *testing.T) {
	t.Parallel()
	b, wt, mainHead := mergeSetup(t, false)
	before := wt.Head
	m, err := b.mgr.MergeTarget(t.Context(), b.proj, wt, "main", "Merge branch 'main' into agent/x")
	require.NoError(t, err)
	require.False(t, m.UpToDate)
	require.Empty(t, m.Conflicts)
	require.Equal(t, mainHead, m.TargetHead)
	require.Equal(t, []string{"Agent: greet the agent"}, m.Ours)
	require.Equal(t, []string{"Main: greet main"}, m.Theirs)
	require.NotEmpty(t, m.Commit)
	parents := run(t, wt.Path, "--git-dir="+wt.gitDir, "rev-list", "--parents", "-n1", m.Commit)
	require.Equal(t, m.Commit+" "+before+" "+mainHead, parents, "a merge commit on top of the pushed history")
	require.NoError(t, b.mgr.Push(t.Context(), wt))

	// Merging again has nothing to do.
	m, err = b.mgr.MergeTarget(t.Context(), b.proj, wt, "main", "again")
	require.NoError(t, err)
	require.True(t, m.UpToDate)
}

func TestMergeTargetConflictResolvedOrRefused(t *testing.T) {
	t.Parallel()
	b, wt, mainHead := mergeSetup(t, true)
	ctx := t.Context()
	m, err := b.mgr.MergeTarget(ctx, b.proj, wt, "main", "Merge branch 'main' into agent/x")
	require.NoError(t, err)
	require.Equal(t, []string{"README"}, m.Conflicts)
	require.Empty(t, m.Commit)
	raw, err := os.ReadFile(filepath.Join(wt.Path, "README"))
	require.NoError(t, err)
	require.Contains(t, string(raw), "<<<<<<< ")
	marked, err := ConflictMarkers(wt.Path, m.Conflicts)
	require.NoError(t, err)
	require.Equal(t, []string{"README"}, marked)

	// A result that leaves a marker is refused, and so is the merge commit.
	_, err = b.mgr.CommitMerge(ctx, wt, m.Conflicts, "Merge branch 'main' into agent/x")
	require.ErrorIs(t, err, ErrMergeUnresolved)
	require.ErrorContains(t, err, "README")

	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "README"), []byte("hello agent and main\n"), 0o644))
	sha, err := b.mgr.CommitMerge(ctx, wt, m.Conflicts, "Merge branch 'main' into agent/x")
	require.NoError(t, err)
	parents := run(t, wt.Path, "--git-dir="+wt.gitDir, "rev-list", "--parents", "-n1", sha)
	require.Contains(t, parents, mainHead)
	require.NoError(t, b.mgr.Push(ctx, wt))
	require.Equal(t, sha, run(t, b.remote, "rev-parse", "refs/heads/agent/x"))
	_, err = b.mgr.CommitMerge(ctx, wt, nil, "x")
	require.ErrorContains(t, err, "no merge in progress")
}

func TestMergeTargetAbort(t *testing.T) {
	t.Parallel()
	b, wt, _ := mergeSetup(t, true)
	before := wt.Head
	m, err := b.mgr.MergeTarget(t.Context(), b.proj, wt, "main", "m")
	require.NoError(t, err)
	require.NotEmpty(t, m.Conflicts)
	require.NoError(t, b.mgr.AbortMerge(t.Context(), wt))
	require.NoError(t, b.mgr.AbortMerge(t.Context(), wt), "no merge: nothing to abort")
	require.Equal(t, before, run(t, wt.Path, "--git-dir="+wt.gitDir, "rev-parse", "HEAD"))
	_, err = b.mgr.MergeTarget(t.Context(), b.proj, wt, "nope", "m")
	require.Error(t, err)
}

func TestConflictMarkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"clean.go":   "a := b\n// ======= not alone\n",
		"ours.txt":   "x\n<<<<<<< HEAD\ny\n",
		"theirs.txt": ">>>>>>> main\n",
		"sep.txt":    "a\n=======\nb\n",
		"diff3.txt":  "|||||||\n",
		"crlf.txt":   "a\r\n=======\r\n",
		// A first line longer than any line buffer does not hide the marker after it.
		"longline.txt": strings.Repeat("x", 17<<20) + "\n<<<<<<< HEAD\n",
	}
	var paths []string
	for name, body := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
		paths = append(paths, name)
	}
	got, err := ConflictMarkers(dir, append(paths, "gone.txt"))
	require.NoError(t, err)
	require.Equal(t, []string{"crlf.txt", "diff3.txt", "longline.txt", "ours.txt", "sep.txt", "theirs.txt"}, got)
	_, err = ConflictMarkers(dir, []string{"../escape"})
	require.Error(t, err)

	// What the agent left at a conflicted path is read as hostile: a FIFO (which would block a
	// plain read) and a file behind a directory linked out of the worktree are refused and
	// leave the merge unresolved; a link itself holds no marker and is not followed.
	outside := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(outside, "f"), []byte("<<<<<<< secret\n"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.txt"), 0o666))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "out")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "f"), filepath.Join(dir, "link.txt")))
	for _, p := range []string{"fifo.txt", "out/f"} {
		_, err = ConflictMarkers(dir, []string{p})
		require.ErrorIs(t, err, ErrMergeUnresolved, p)
		require.ErrorIs(t, err, runfile.ErrRefused, p)
	}
	got, err = ConflictMarkers(dir, []string{"link.txt"})
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestDiffAndMergeBase(t *testing.T) {
	t.Parallel()
	b, wt, _ := mergeSetup(t, false)
	d, err := b.mgr.Diff(t.Context(), wt, "origin/main", "HEAD")
	require.NoError(t, err)
	require.Contains(t, d, "diff --git a/README b/README")
	require.Contains(t, d, "+hello agent")
	require.NotContains(t, d, "OTHER", "only the branch's side since the merge base")
	base, err := b.mgr.MergeBase(t.Context(), wt, "origin/main", "HEAD")
	require.NoError(t, err)
	require.Equal(t, b.mainSHA, base)

	// A diff without end (what an agent's files can make git print: gigabytes) is read only up
	// to the bound, and git is stopped: Diff returns it cut, holding no more than that.
	endless := filepath.Join(t.TempDir(), "git")
	require.NoError(t, os.WriteFile(endless, []byte("#!/bin/sh\nfor a; do [ \"$a\" = diff ] && exec yes '+a line the agent wrote'; done\nexec git \"$@\"\n"), 0o755))
	b.mgr.cfg.GitBinary = endless
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	d, err = b.mgr.Diff(ctx, wt, "origin/main", "HEAD")
	require.NoError(t, err)
	require.NoError(t, ctx.Err(), "the diff was read to its bound, not to the deadline")
	require.LessOrEqual(t, len(d), MaxDiffBytes+64)
	require.True(t, strings.HasSuffix(d, fmt.Sprintf("[diff cut at %d KiB]", MaxDiffBytes>>10)), "%q", d[max(0, len(d)-80):])
}

// A large file the target branch brings (a human's asset on main, over MaxCommitFileBytes) is
// staged by the merge itself, git has it already: resolving a conflict beside it is not
// refused. Only what the agent changed is measured.
func TestCommitMergeKeepsTheTargetsLargeFile(t *testing.T) {
	t.Parallel()
	b, wt, _ := mergeSetup(t, true)
	work := filepath.Join(t.TempDir(), "work")
	run(t, filepath.Dir(work), "clone", "--quiet", b.remote, work)
	f, err := os.Create(filepath.Join(work, "assets.bin"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(MaxCommitFileBytes+1)) // sparse, zeros: git stores it small
	require.NoError(t, f.Close())
	run(t, work, "add", "assets.bin")
	run(t, work, "commit", "--quiet", "-m", "Main: a large asset")
	run(t, work, "push", "--quiet", "origin", "main")
	ctx := t.Context()
	m, err := b.mgr.MergeTarget(ctx, b.proj, wt, "main", "Merge branch 'main' into agent/x")
	require.NoError(t, err)
	require.Equal(t, []string{"README"}, m.Conflicts)
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "README"), []byte("hello agent and main\n"), 0o644))
	_, err = b.mgr.CommitMerge(ctx, wt, m.Conflicts, "Merge branch 'main' into agent/x")
	require.NoError(t, err)
}

// A file over MaxCommitFileBytes the agent left while resolving is refused as hostile output
// (too_large) and leaves the merge unresolved.
func TestCommitMergeRefusesTheAgentsOversizedFile(t *testing.T) {
	t.Parallel()
	b, wt, _ := mergeSetup(t, true)
	ctx := t.Context()
	m, err := b.mgr.MergeTarget(ctx, b.proj, wt, "main", "Merge branch 'main' into agent/x")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "README"), []byte("hello agent and main\n"), 0o644))
	f, err := os.Create(filepath.Join(wt.Path, "dump.bin"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<40))
	require.NoError(t, f.Close())
	_, err = b.mgr.CommitMerge(ctx, wt, m.Conflicts, "Merge branch 'main' into agent/x")
	require.ErrorIs(t, err, ErrMergeUnresolved)
	require.Equal(t, runfile.ReasonTooLarge, runfile.Reason(err))
}
