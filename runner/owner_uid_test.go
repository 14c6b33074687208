package runner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Alfred not root (the compose file's uid) with runs of another uid would give every writing
// run a worktree it cannot write: refused at start with the fix, not found run by run.
func TestNonRootAlfredNeedsTheRunsUID(t *testing.T) {
	old := processUID
	processUID = func() int { return 10001 }
	t.Cleanup(func() { processUID = old })
	_, err := NewExecutor(Config{Runtime: nopRuntime{}, DataDir: t.TempDir(), UID: 65532, GID: 65532})
	require.ErrorContains(t, err, "set runner.uid to 10001")
	_, err = NewExecutor(Config{Runtime: nopRuntime{}, DataDir: t.TempDir(), UID: 10001, GID: 10001})
	require.NoError(t, err)
}

// nopRuntime is a Runtime that is never called.
type nopRuntime struct{ Runtime }
