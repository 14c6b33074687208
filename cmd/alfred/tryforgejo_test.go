package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/doctor"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// tryForgejo runs scripts/try-forgejo.sh with args against the Forgejo at url, its files in dir.
func tryForgejo(t *testing.T, url, dir, hookURL string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{"../../scripts/try-forgejo.sh"}, args...)...)
	cmd.Env = append(os.Environ(), "ALFRED_TRY_URL="+url, "ALFRED_TRY_DIR="+dir, "ALFRED_TRY_BOT="+forgetest.BotLogin,
		"ALFRED_TRY_HOOK_URL="+hookURL)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestTryForgejoSetup keeps the throwaway Forgejo of docs/forges.md true where it can run here: the API
// part of scripts/try-forgejo.sh (bot account, its token, a repository with the bot as admin,
// the webhook to Alfred) runs against the Forgejo stand-in's setup calls, and with the files it
// wrote `alfred doctor` passes and prints the webhook URL. (Starting the container, `start`,
// needs the image from codeberg.org and is not run here.) A second setup on the same server
// stops with the fix: it sets up a fresh Forgejo.
func TestTryForgejoSetup(t *testing.T) {
	t.Parallel()
	_, image := scriptAgents(t, "default: {summary: ok}\n")
	fj := forgetest.NewForgejoServer(t)
	const adminPassword = "try-admin-7f3a9c"
	fj.EnableSetup("alice", adminPassword)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "forgejo-try.admin"), []byte(adminPassword+"\n"), 0o600))
	const secret = "3f9d2c41b0a7e6f58c1d2e3a4b5c6d7e"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "webhook.secret"), []byte(secret+"\n"), 0o600))
	const public = "http://127.0.0.1:8080"

	out, err := tryForgejo(t, fj.URL, dir, public+"/webhooks/forgejo", "setup")
	require.NoError(t, err, out)
	require.Contains(t, out, "next: make run")
	tok, err := os.ReadFile(filepath.Join(dir, "forgejo.token"))
	require.NoError(t, err)
	require.Equal(t, fj.Token+"\n", string(tok), "the bot's token")
	st, err := os.Stat(filepath.Join(dir, "forgejo.token"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	client, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: fj.URL, Token: fj.Token})
	require.NoError(t, err)
	hooks, err := client.Hooks(context.Background(), "alice/sandbox")
	require.NoError(t, err, "the bot lists the repository's hooks: it is an admin")
	require.Len(t, hooks, 1)
	require.Equal(t, secret, fj.HookSecret(hooks[0].ID), "the webhook carries webhook.secret")
	require.Subset(t, hooks[0].Events, doctor.ForgejoEvents)

	// With those files, the doctor passes.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("default: {summary: ok}\n"), 0o600))
	cfg := filepath.Join(dir, "alfred.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
public_url: %s
data_dir: %s
forges:
  - {name: forgejo, kind: forgejo, base_url: %s, token_file: forgejo.token, webhook_secret_file: webhook.secret, bot_user: %s, repositories: [alice/sandbox]}
agents:
  - {name: script, image: %s, script: script.yaml}
`, public, filepath.Join(dir, "data"), fj.URL, forgetest.BotLogin, image)), 0o600))
	r := runArgs(t, "doctor", "--config", cfg)
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "Webhook URL to set on forgejo (forgejo): "+public+"/webhooks/forgejo")

	out, err = tryForgejo(t, fj.URL, dir, public+"/webhooks/forgejo", "setup")
	require.Error(t, err, out)
	require.Contains(t, out, "user already exists")
	require.Contains(t, out, "this sets up a fresh Forgejo")
	require.NotContains(t, out, adminPassword)
	require.True(t, strings.Contains(out, "cannot create the bot account"), out)
}

// The setup's API calls carry the administrator's and the bot's passwords and the webhook
// secret in files curl reads, never in its arguments, which any local user sees (ps,
// /proc/PID/cmdline): a curl in front of the real one records every argument.
func TestTryForgejoKeepsSecretsOutOfArgv(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	require.NoError(t, err)
	fj := forgetest.NewForgejoServer(t)
	const adminPassword = "try-admin-5e8b1d"
	fj.EnableSetup("alice", adminPassword)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "forgejo-try.admin"), []byte(adminPassword+"\n"), 0o600))
	const secret = "9c1e4a7b2d5f8e0a3c6b9d2e5f8a1b4c"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "webhook.secret"), []byte(secret+"\n"), 0o600))
	bin, argv := t.TempDir(), filepath.Join(t.TempDir(), "argv")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "curl"), []byte(fmt.Sprintf(
		"#!/usr/bin/env bash\nprintf '%%s\\n' \"$*\" >>%q\nexec %q \"$@\"\n", argv, curl)), 0o755))

	cmd := exec.Command("bash", "../../scripts/try-forgejo.sh", "setup")
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "ALFRED_TRY_URL="+fj.URL,
		"ALFRED_TRY_DIR="+dir, "ALFRED_TRY_BOT="+forgetest.BotLogin, "ALFRED_TRY_HOOK_URL=http://127.0.0.1:8080/webhooks/forgejo")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	args, err := os.ReadFile(argv)
	require.NoError(t, err)
	require.Contains(t, string(args), "/api/v1/", "the calls went through the recording curl")
	require.NotContains(t, string(args), adminPassword)
	require.NotContains(t, string(args), secret)
	require.NotContains(t, string(args), "password", "no password in a request body on the command line")
}
