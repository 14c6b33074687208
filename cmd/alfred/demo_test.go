package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/runner/agent/script"
)

// The README's demo: deploy/demo/alfred.yaml copied to the root of the repository, with its
// two secret files beside it, loads, and its script parses.
func TestDemoConfigurationLoads(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	deploy, err := filepath.Abs("../../deploy")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(deploy, filepath.Join(root, "deploy")))
	demo, err := os.ReadFile("../../deploy/demo/alfred.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "alfred.yaml"), demo, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "forgejo.token"), []byte("0123456789abcdef0123\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "webhook.secret"), []byte("a-webhook-secret\n"), 0o600))

	cfg, err := config.Load(filepath.Join(root, "alfred.yaml"), nil)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "alfred-data"), cfg.DataDir, "relative to the configuration file, absolute")
	require.Len(t, cfg.Agents, 1)
	_, err = script.New(script.Config{Image: cfg.Agents[0].Image, ScriptFile: cfg.Agents[0].Script})
	require.NoError(t, err, "the demo script parses")
}
