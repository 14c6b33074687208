package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/store"
	"github.com/alfred-bot/alfred/migrations"
	"github.com/alfred-bot/alfred/runner/agent/script"
)

// The README's demo: scripts/demo-files.sh (run by make run) copies deploy/demo/alfred.yaml to
// the root of the repository, creates the secrets it can and names the one it cannot; with
// that file created, the configuration loads, selects the embedded SQLite store in its
// data_dir, and its script parses.
func TestDemoConfigurationLoads(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for _, d := range []string{"deploy", "scripts"} {
		abs, err := filepath.Abs("../../" + d)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(abs, filepath.Join(root, d)))
	}
	demo := func() (string, error) {
		cmd := exec.Command("bash", "scripts/demo-files.sh")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := demo()
	require.Error(t, err, "the bot's token is missing:\n%s", out)
	require.Contains(t, out, "created alfred.yaml from deploy/demo/alfred.yaml")
	require.Contains(t, out, "missing forgejo.token: only you can create it")
	for _, f := range []string{"webhook.secret", "admin.token"} {
		st, err := os.Stat(filepath.Join(root, f))
		require.NoError(t, err, "demo-files.sh creates %s", f)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	}
	secret, err := os.ReadFile(filepath.Join(root, "webhook.secret"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "forgejo.token"), []byte("0123456789abcdef0123\n"), 0o600))
	out, err = demo()
	require.NoError(t, err, out)
	again, err := os.ReadFile(filepath.Join(root, "webhook.secret"))
	require.NoError(t, err)
	require.Equal(t, secret, again, "existing files are left alone")

	cfg, err := config.Load(filepath.Join(root, "alfred.yaml"), nil)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "alfred-data"), cfg.DataDir, "relative to the configuration file, absolute")
	d, path := store.Engine(cfg.DatabaseURL.Reveal(), cfg.DataDir)
	require.Equal(t, migrations.SQLite, d, "the demo needs no database server")
	require.Equal(t, filepath.Join(root, "alfred-data", "alfred.db"), path)
	require.Len(t, cfg.Agents, 1)
	require.Len(t, cfg.Admin.Token.Reveal(), 64)
	_, err = script.New(script.Config{Image: cfg.Agents[0].Image, ScriptFile: cfg.Agents[0].Script})
	require.NoError(t, err, "the demo script parses")
}
