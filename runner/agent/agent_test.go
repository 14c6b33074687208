package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent"
)

// TestNewEveryKind: New builds each kind under its own name, passes the key only in the
// environment, and refuses an unknown kind.
func TestNewEveryKind(t *testing.T) {
	t.Parallel()
	scriptFile := filepath.Join(t.TempDir(), "script.yaml")
	require.NoError(t, os.WriteFile(scriptFile, []byte("default:\n  summary: s\n"), 0o644))
	for _, kind := range agent.Kinds() {
		a, err := agent.New(kind, agent.Config{Image: "img:" + kind, APIKey: "key-0123456789", Script: scriptFile, Model: "m"})
		require.NoError(t, err, kind)
		require.Equal(t, kind, a.Name())
		if sa, ok := a.(runner.SessionAgent); ok {
			require.True(t, sa.Capabilities().ResumableSessions, kind)
			_, err := agent.New(kind, agent.Config{Image: "img"})
			require.Error(t, err, "%s without a key", kind)
		}
		if _, ok := a.(runner.APIAgent); ok {
			_, err := agent.New(kind, agent.Config{APIKey: "key-0123456789"})
			require.Error(t, err, "%s without a model", kind)
		}
	}
	_, err := agent.New("aider", agent.Config{Image: "img"})
	require.ErrorContains(t, err, `unknown adapter "aider"`)
}
