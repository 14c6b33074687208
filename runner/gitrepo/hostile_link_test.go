package gitrepo

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/runfile"
)

// TestHugeDotGitIsNotRead: a container may leave any file as the worktree's .git (a sparse one
// of gigabytes); the next Prepare replaces it without reading it.
func TestHugeDotGitIsNotRead(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	wt, err := b.mgr.Prepare(t.Context(), b.proj, "alfred-mbx1-worktree", Checkout{Branch: "agent/issue-1"})
	require.NoError(t, err)
	link := filepath.Join(wt.Path, ".git")
	require.NoError(t, os.Remove(link))
	f, err := os.Create(link)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(256<<20)) // sparse: no disk
	require.NoError(t, f.Close())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = b.mgr.Prepare(t.Context(), b.proj, "alfred-mbx1-worktree", Checkout{Branch: "agent/issue-1"})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "the hostile .git is not read")
}

// A FIFO (or a socket, a device) the agent left in place of a tracked file cannot be committed:
// Commit refuses it as hostile output (runfile's not_regular, naming the path), not as a
// failure of git, so the run fails with the reason instead of being run again.
func TestCommitRefusesAFIFOInPlaceOfATrackedFile(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AuthorName: "Alfred", AuthorEmail: "alfred@example.org"})
	wt, err := b.mgr.Prepare(t.Context(), b.proj, "alfred-mbx1-worktree", Checkout{Branch: "agent/issue-1"})
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(wt.Path, "README")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(wt.Path, "README"), 0o644))
	_, err = b.mgr.Commit(t.Context(), wt, "Agent: a FIFO")
	require.ErrorIs(t, err, runfile.ErrRefused)
	require.Equal(t, runfile.ReasonNotRegular, runfile.Reason(err))
	require.Contains(t, err.Error(), "README")
}

// A file the agent left over MaxCommitFileBytes (a sparse one of a terabyte costs it no disk) is
// refused before git reads it: Commit returns runfile's too_large naming the path at once,
// where git would hash the whole terabyte.
func TestCommitRefusesAnOversizedFileUnread(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AuthorName: "Alfred", AuthorEmail: "alfred@example.org"})
	wt, err := b.mgr.Prepare(t.Context(), b.proj, "alfred-mbx1-worktree", Checkout{Branch: "agent/issue-1"})
	require.NoError(t, err)
	f, err := os.Create(filepath.Join(wt.Path, "dump.bin"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<40)) // sparse: no disk
	require.NoError(t, f.Close())
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = b.mgr.Commit(ctx, wt, "Agent: a dump")
	require.NoError(t, ctx.Err(), "refused before git read it")
	require.ErrorIs(t, err, runfile.ErrRefused)
	require.Equal(t, runfile.ReasonTooLarge, runfile.Reason(err))
	require.Contains(t, err.Error(), "dump.bin")

	// A file at the bound is committed.
	require.NoError(t, os.Remove(filepath.Join(wt.Path, "dump.bin")))
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "ok.txt"), []byte("ok\n"), 0o644))
	sha, err := b.mgr.Commit(t.Context(), wt, "Agent: ok")
	require.NoError(t, err)
	require.NotEmpty(t, sha)
}
