package gitrepo

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
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
