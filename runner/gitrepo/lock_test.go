package gitrepo

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMirrorLockFailsClosed: when flock(2) fails on the mirror's lock file (network
// filesystems answer ENOLCK, EINVAL or ENOTSUP), Prepare, Sync, Push and Warm return
// ErrMirrorLock with the cause, and no git command runs on the mirror; once flock works again,
// the same calls succeed (nothing was left held).
func TestMirrorLockFailsClosed(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ctx := context.Background()
	wt, err := b.mgr.Prepare(ctx, b.proj, "alfred-mbx7-worktree", Checkout{Branch: "agent/issue-7"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "x"), []byte("x\n"), 0o644))
	_, err = b.mgr.Commit(ctx, wt, "x")
	require.NoError(t, err)

	var mu sync.Mutex
	var ran [][]string
	b.mgr.trace = func(args []string) { mu.Lock(); ran = append(ran, args); mu.Unlock() }
	for _, errno := range []syscall.Errno{syscall.ENOLCK, syscall.EINVAL, syscall.ENOTSUP} {
		b.mgr.flock = func(int, int) error { return errno }
		_, err = b.mgr.Prepare(ctx, b.proj, "alfred-mbx7-worktree", Checkout{Branch: "agent/issue-7"})
		require.ErrorIs(t, err, ErrMirrorLock)
		require.ErrorIs(t, err, errno)
		_, err = b.mgr.Sync(ctx, b.proj)
		require.ErrorIs(t, err, ErrMirrorLock)
		require.ErrorIs(t, b.mgr.Push(ctx, wt), ErrMirrorLock)
		require.ErrorIs(t, b.mgr.Warm(ctx, b.proj), ErrMirrorLock)
		require.ErrorIs(t, b.mgr.RemoveWorktree(ctx, wt), ErrMirrorLock)
	}
	mu.Lock()
	require.Empty(t, ran, "git ran on a mirror whose lock failed")
	mu.Unlock()
	require.DirExists(t, wt.Path)

	b.mgr.flock = nil
	require.NoError(t, b.mgr.Push(ctx, wt))
	_, err = b.mgr.Prepare(ctx, b.proj, "alfred-mbx7-worktree", Checkout{Branch: "agent/issue-7"})
	require.NoError(t, err)
}
