package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"database/sql"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/censor"
	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/store/sqlite"
	"github.com/alfred-bot/alfred/webhook/forgejo"
)

const (
	fixture         = "testdata/002-issue_assign-assigned.json"
	fixtureDelivery = "ec2e3d91-c6e5-4adf-8143-ba2a4e6b5806"
	webhookSecret   = "hook-s3cr3t"
)

// testConfig is a complete configuration whose secrets all contain "s3cr3t"; writeConfig
// fills in DATABASE_URL and FORGE_URL.
const testConfig = `
database_url: DATABASE_URL
forges:
  - name: forgejo
    kind: forgejo
    base_url: FORGE_URL
    token: tok-s3cr3t
    webhook_secret_file: hook
    bot_user: alfred
agents:
  - name: script
    image: alfred/script-agent:dev
    script: script.yaml
`

// result is what one run printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

func runArgs(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// writeConfig writes testConfig (with databaseURL) and its secret file; it returns the path.
// The forge is a loopback port nothing listens on (closedLoopbackURL): a command that reaches
// for it (the doctor) is refused at once, and no name is resolved nor packet sent off the
// machine.
func writeConfig(t *testing.T, databaseURL string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hook"), []byte(webhookSecret+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "script.yaml"), []byte("default: {summary: ok}\n"), 0o600))
	p := filepath.Join(dir, "alfred.yaml")
	cfg := strings.NewReplacer("DATABASE_URL", databaseURL, "FORGE_URL", closedLoopbackURL(t)).Replace(testConfig)
	require.NoError(t, os.WriteFile(p, []byte(cfg), 0o600))
	return p
}

// closedLoopbackURL returns the http:// URL of a loopback port the kernel gave and the test
// closed again, so nothing listens on it: a dial is refused at once.
func closedLoopbackURL(t testing.TB) string { return "http://" + freeAddr(t) }

func TestVersion(t *testing.T) {
	r := runArgs(t, "version")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "alfred "), r.stdout)
	require.Contains(t, r.stdout, runtime.Version())

	old := version
	version = "v1.2.3"
	t.Cleanup(func() { version = old })
	r = runArgs(t, "version")
	require.Equal(t, "alfred v1.2.3 "+runtime.Version()+"\n", r.stdout)
}

func TestUsage(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		code int
		want string
	}{
		"no command":      {nil, 2, "usage: alfred <command>"},
		"unknown command": {[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		"help":            {[]string{"help"}, 0, "commands:"},
		"config alone":    {[]string{"config"}, 2, "usage: alfred config check"},
		"bad flag":        {[]string{"config", "check", "--nope"}, 2, "flag provided but not defined"},
		"replay no url":   {[]string{"replay", fixture}, 2, "usage: alfred replay"},
		"flag help":       {[]string{"migrate", "-h"}, 0, "-config"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := runArgs(t, tc.args...)
			require.Equal(t, tc.code, r.code, r.stderr)
			require.Contains(t, r.stdout+r.stderr, tc.want)
		})
	}
}

func TestConfigCheck(t *testing.T) {
	t.Parallel()

	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		p := writeConfig(t, "postgres://alfred:pw-s3cr3t@db/alfred")
		r := runArgs(t, "config", "check", "--config", p)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "listen: :8080")
		require.Contains(t, r.stdout, `token: "[redacted]"`)
		require.Contains(t, r.stdout, "lease_ttl: 1m0s")
		require.Contains(t, r.stderr, "OK")
		require.NotContains(t, r.stdout+r.stderr, "s3cr3t")
	})

	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		p := writeConfig(t, "postgres://alfred:pw-s3cr3t@db/alfred")
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, bytes.Replace(raw, []byte("base_url: http://"), []byte("base_url: "), 1), 0o600))
		r := runArgs(t, "config", "check", "--config", p)
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "forges[0].base_url: must be an absolute")
		require.Empty(t, r.stdout)
		require.NotContains(t, r.stderr, "s3cr3t")
	})

	t.Run("project", func(t *testing.T) {
		t.Parallel()
		p := writeConfig(t, "postgres://alfred:pw-s3cr3t@db/alfred")
		f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("lifecycle: {budget_usd: 3}\nscopes:\n  acme: {branch_prefix: acme/}\n  acme/shop: {budget_usd: 0.5}\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		r := runArgs(t, "config", "check", "--config", p, "--project", "acme/shop")
		require.Equal(t, 0, r.code, r.stderr)
		for _, want := range []string{"# settings in force (project acme/shop)",
			`# branch_prefix = "acme/" (org acme)`, "# budget_usd = 0.50 (project acme/shop)",
			"# question_deadline = 24h0m0s (default)", "# phases.default = script (global)"} {
			require.Contains(t, r.stdout, want)
		}
	})

	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		r := runArgs(t, "config", "check", "--config", filepath.Join(t.TempDir(), "none.yaml"))
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stderr, "not found and the environment is incomplete")
	})
}

// TestServeRefusesConfusableSecret: alfred serve (and every command that loads the
// configuration) refuses to start with a secret the censor would confuse with Alfred's own
// words, naming the setting and the fix, before it opens anything.
func TestServeRefusesConfusableSecret(t *testing.T) {
	t.Parallel()
	for _, cmd := range [][]string{{"serve"}, {"doctor"}, {"config", "check"}} {
		p := writeConfig(t, "postgres://alfred:alfred@127.0.0.1:1/alfred?sslmode=disable")
		r := runArgs(t, append(cmd, "--config", p)...)
		require.Equal(t, 1, r.code, "%v: %s", cmd, r.stderr)
		out := r.stderr
		if cmd[0] == "doctor" { // the doctor lists it as its failed configuration check
			out = r.stdout
		}
		require.Contains(t, out, "database_url: the password is shorter than 8 bytes", cmd)
		require.Contains(t, out, "run scripts/dev-deps.sh again", cmd)
		require.NotContains(t, r.stdout, "serving", cmd)
	}
}

func TestErrorsCensored(t *testing.T) {
	t.Parallel()
	// run prints a failed command's error through the censor of the configuration it loaded:
	// long secrets anywhere, a short one as a whole token only.
	a := &app{censor: censor.New(censor.Config{Secrets: []string{"pw-s3cr3t-long", "alfred"}})}
	require.Equal(t, "dial [redacted] as [redacted], alfred-bot", a.censor.String("dial pw-s3cr3t-long as alfred, alfred-bot"))
}

// received is one request the fake Alfred got.
type received struct {
	header http.Header
	body   []byte
}

// fakeAlfred is an httptest server that checks the signature of kind like Alfred would.
func fakeAlfred(t *testing.T, kind string) (*httptest.Server, func() received) {
	t.Helper()
	var (
		mu  sync.Mutex
		got received
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = received{r.Header.Clone(), body}
		mu.Unlock()
		switch kind {
		case "forgejo":
			want := forgejo.Sign(webhookSecret, body)
			for _, h := range []string{"X-Forgejo-Signature", "X-Gitea-Signature"} {
				if !hmac.Equal([]byte(r.Header.Get(h)), []byte(want)) {
					http.Error(w, "bad signature in "+h, http.StatusUnauthorized)
					return
				}
			}
		case "gitlab":
			if r.Header.Get("X-Gitlab-Token") != webhookSecret {
				http.Error(w, "bad token", http.StatusUnauthorized)
				return
			}
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"status":"queued"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() received { mu.Lock(); defer mu.Unlock(); return got }
}

func secretFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

func TestReplayForgejo(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile(fixture)
	require.NoError(t, err)

	t.Run("fresh delivery", func(t *testing.T) {
		t.Parallel()
		srv, got := fakeAlfred(t, "forgejo")
		r := runArgs(t, "replay", "--url", srv.URL+"/webhooks/forgejo", "--secret-file", secretFile(t, webhookSecret+"\n"), fixture)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "202 Accepted")
		require.Contains(t, r.stdout, `{"status":"queued"}`)

		g := got()
		require.Equal(t, want, g.body, "body sent byte for byte")
		require.Equal(t, "issues", g.header.Get("X-Forgejo-Event"))
		require.Equal(t, "issue_assign", g.header.Get("X-Forgejo-Event-Type"))
		require.Equal(t, "issue_assign", g.header.Get("X-Gitea-Event-Type"))
		require.Equal(t, "application/json", g.header.Get("Content-Type"))
		id := g.header.Get("X-Forgejo-Delivery")
		require.NotEqual(t, fixtureDelivery, id)
		_, err := uuid.Parse(id)
		require.NoError(t, err)
		for _, h := range []string{"X-Gitea-Delivery", "X-Gogs-Delivery", "X-GitHub-Delivery"} {
			require.Equal(t, id, g.header.Get(h), h)
		}
		for _, h := range []string{"X-Hub-Signature", "X-Hub-Signature-256", "X-Gogs-Signature"} {
			require.Empty(t, g.header.Get(h), "stale %s dropped", h)
		}
	})

	t.Run("keep delivery, flags after the fixture", func(t *testing.T) {
		t.Parallel()
		srv, got := fakeAlfred(t, "forgejo")
		r := runArgs(t, "replay", fixture, "--keep-delivery", "--kind", "forgejo",
			"--url", srv.URL, "--secret-file", secretFile(t, webhookSecret), "-H", "X-Extra: yes")
		require.Equal(t, 0, r.code, r.stderr)
		g := got()
		require.Equal(t, fixtureDelivery, g.header.Get("X-Forgejo-Delivery"))
		require.Equal(t, "yes", g.header.Get("X-Extra"))
	})

	t.Run("wrong secret", func(t *testing.T) {
		t.Parallel()
		srv, _ := fakeAlfred(t, "forgejo")
		r := runArgs(t, "replay", "--url", srv.URL, "--secret-file", secretFile(t, "wrong-s3cr3t"), fixture)
		require.Equal(t, 1, r.code)
		require.Contains(t, r.stdout, "401 Unauthorized")
		require.Contains(t, r.stderr, "server answered 401")
		require.NotContains(t, r.stdout+r.stderr, "s3cr3t")
	})
}

func TestReplayGitLab(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body := []byte(`{"object_kind":"issue","event_type":"issue"}` + "\n")
	p := filepath.Join(dir, "issue.json")
	require.NoError(t, os.WriteFile(p, body, 0o600))
	require.NoError(t, os.WriteFile(p+".headers", []byte(
		"Content-Type: application/json\nX-Gitlab-Event: Issue Hook\nX-Gitlab-Token: old-token\nX-Gitlab-Event-UUID: 1111\n"), 0o600))

	srv, got := fakeAlfred(t, "gitlab")
	r := runArgs(t, "replay", "--url", srv.URL+"/webhooks/gitlab", "--secret-file", secretFile(t, webhookSecret), p)
	require.Equal(t, 0, r.code, r.stderr)
	g := got()
	require.Equal(t, body, g.body)
	require.Equal(t, "Issue Hook", g.header.Get("X-Gitlab-Event"))
	require.Equal(t, webhookSecret, g.header.Get("X-Gitlab-Token"))
	require.NotEqual(t, "1111", g.header.Get("X-Gitlab-Event-UUID"))
	require.Equal(t, g.header.Get("X-Gitlab-Event-UUID"), g.header.Get("Idempotency-Key"))
	require.Empty(t, g.header.Get("X-Forgejo-Signature"))
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	base := pgtest.URL(t)

	// An empty schema of our own, so migrate does the whole work.
	admin, err := sql.Open("postgres", base)
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close() })
	schema := "t_migrate_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	_, err = admin.Exec("CREATE SCHEMA " + schema)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
	u, err := url.Parse(base)
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()

	p := writeConfig(t, u.String())
	for range 2 { // idempotent
		r := runArgs(t, "migrate", "--config", p)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "migrations applied")
	}
	var n int
	require.NoError(t, admin.QueryRow(
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'alfred_schema_version'`,
		schema).Scan(&n))
	require.Equal(t, 1, n)
}

// With no database_url, migrate applies the SQLite migrations to <data_dir>/alfred.db, and is
// refused with the reason while another process (here: this test) holds the database.
func TestMigrateSQLite(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), "data")
	p := writeConfig(t, `""`)
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("data_dir: " + dataDir + "\n")
	require.NoError(t, errors.Join(err, f.Close()))

	for range 2 { // idempotent
		r := runArgs(t, "migrate", "--config", p)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, "migrations applied (SQLite "+filepath.Join(dataDir, "alfred.db")+")")
	}
	db, err := sqlite.OpenDB(context.Background(), filepath.Join(dataDir, "alfred.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	var n int
	require.NoError(t, db.Get(&n, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'alfred_schema_version'`))
	require.Equal(t, 1, n)

	r := runArgs(t, "migrate", "--config", p)
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "in use by another process")
	require.Contains(t, r.stderr, "postgres://")
}
