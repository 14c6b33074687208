package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/doctor"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// TestDoctorFindsWhatBlocksWork runs "alfred doctor" against real PostgreSQL and Docker and
// two Forgejo stand-ins: one given a wrong token, one whose repository has no webhook, and an
// agent whose image does not exist. Each failure is printed with its fix, and the exit code
// is 1.
func TestDoctorFindsWhatBlocksWork(t *testing.T) {
	t.Parallel()
	runtimetest.Client(t) // Docker must be reachable (skips loudly outside CI)
	dsn := pgtest.URL(t)

	wrong := forgetest.NewForgejoServer(t)
	nohook := forgetest.NewForgejoServer(t)
	for _, s := range []*forgetest.ForgejoServer{wrong, nohook} {
		s.AddRepo("alice/shop", "main", s.URL+"/alice/shop.git")
		s.SetAccessLevel("alice/shop", forgetest.BotLogin, 40)
	}
	const public = "http://alfred.test:8080"
	wrong.AddHook("alice/shop", forge.Hook{URL: public + "/webhooks/wrong", ContentType: "json", Active: true,
		Events: doctor.ForgejoEvents})

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("default: {summary: ok}\n"), 0o600))
	cfg := filepath.Join(dir, "alfred.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
public_url: %s
database_url: %s
data_dir: %s
forges:
  - {name: wrong, kind: forgejo, base_url: %s, token: not-the-s3cr3t-token, webhook_secret: hook-s3cr3t-1, bot_user: %s, repositories: [alice/shop]}
  - {name: nohook, kind: forgejo, base_url: %s, token: %s, webhook_secret: hook-s3cr3t-2, bot_user: %s, repositories: [alice/shop]}
agents:
  - {name: script, image: alfred-doctor-test-missing:nope, script: script.yaml}
`, public, dsn, filepath.Join(dir, "data"), wrong.URL, forgetest.BotLogin, nohook.URL, nohook.Token, forgetest.BotLogin)), 0o600))

	r := runArgs(t, "doctor", "--config", cfg)
	require.Equal(t, 1, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	for _, want := range []string{
		"[ok]   database: reachable",
		"[ok]   docker: engine reachable",
		"[FAIL] agent script: image: alfred-doctor-test-missing:nope is missing",
		"fix: make script-agent-image",
		"[FAIL] forge wrong: token: the forge rejects the token",
		"fix: create an access token of " + forgetest.BotLogin,
		"[ok]   forge nohook: alice/shop: permission: " + forgetest.BotLogin + " has admin",
		"[FAIL] forge nohook: alice/shop: webhook: no webhook",
		"fix: on alice/shop: Settings → Webhooks → Add webhook (Gitea/Forgejo): URL " + public + "/webhooks/nohook",
		"3 check(s) failed",
	} {
		require.Contains(t, r.stdout, want)
	}
	require.NotContains(t, r.stdout, "Webhook URL to set", "no webhook URL while a check fails (the missing hook's fix names it)")
	require.NotContains(t, r.stdout+r.stderr, nohook.Token)
	require.NotContains(t, r.stdout+r.stderr, "s3cr3t")
	t.Logf("alfred doctor:\n%s", r.stdout)
	require.True(t, strings.HasSuffix(strings.TrimSpace(r.stderr), "doctor: some checks failed (see above)"), r.stderr)
}

// TestDoctorPassesThenPrintsWebhookURL: with everything in order (the embedded store, Docker,
// the script agent's image, a Forgejo stand-in whose repository has Alfred's webhook) the doctor
// passes, and only then prints the webhook URL to set on each forge.
func TestDoctorPassesThenPrintsWebhookURL(t *testing.T) {
	t.Parallel()
	_, image := scriptAgents(t, "default: {summary: ok}\n")
	fj := forgetest.NewForgejoServer(t)
	fj.AddRepo("alice/shop", "main", fj.URL+"/alice/shop.git")
	fj.SetAccessLevel("alice/shop", forgetest.BotLogin, 40)
	const public = "http://alfred.test:8080"
	fj.AddHook("alice/shop", forge.Hook{URL: public + "/webhooks/forgejo", ContentType: "json", Active: true,
		Events: doctor.ForgejoEvents})

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("default: {summary: ok}\n"), 0o600))
	cfg := filepath.Join(dir, "alfred.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`
public_url: %s
data_dir: %s
forges:
  - {name: forgejo, kind: forgejo, base_url: %s, token: %s, webhook_secret: hook-s3cr3t-3, bot_user: %s, repositories: [alice/shop]}
agents:
  - {name: script, image: %s, script: script.yaml}
`, public, filepath.Join(dir, "data"), fj.URL, fj.Token, forgetest.BotLogin, image)), 0o600))

	r := runArgs(t, "doctor", "--config", cfg)
	require.Equal(t, 0, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	require.Contains(t, r.stdout, "checks passed")
	// The embedded SQLite store of a first start: said to be missing, never created here.
	require.Contains(t, r.stdout, "[warn] database: no SQLite database at "+filepath.Join(dir, "data", "alfred.db"))
	require.NoFileExists(t, filepath.Join(dir, "data", "alfred.db"), "the doctor created a database")
	i := strings.Index(r.stdout, "checks passed")
	j := strings.Index(r.stdout, "Webhook URL to set on forgejo (forgejo): "+public+"/webhooks/forgejo")
	require.Greater(t, j, i, "the webhook URL comes after the passing checklist:\n%s", r.stdout)
}
