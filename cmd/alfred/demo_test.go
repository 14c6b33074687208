package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/demo"
	"github.com/alfred-bot/alfred/internal/store"
	"github.com/alfred-bot/alfred/migrations"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// make run's files (docs/forges.md): scripts/demo-files.sh copies deploy/demo/alfred.yaml to
// the root of the repository, creates the secrets it can and names the one it cannot, exiting
// 3 (make run then plays the demo); with that file created, the configuration loads, selects
// the embedded SQLite store in its data_dir, and its script parses. A configuration without
// forges plays the demo too.
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
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the bot's token is missing:\n%s", out)
	require.Equal(t, 3, exit.ExitCode(), "no forge yet: make run plays the demo")
	demoAt := strings.Index(out, "no forge yet (forgejo.token is missing): playing Alfred's demo")
	createdAt := strings.Index(out, "created alfred.yaml from deploy/demo/alfred.yaml, for your own forge later")
	require.True(t, demoAt >= 0 && createdAt > demoAt, "what make run does comes first, then the files it made:\n%s", out)
	require.Contains(t, out, "Later, to use your own forge, create forgejo.token")
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

	require.NoError(t, os.WriteFile(filepath.Join(root, "alfred.yaml"),
		[]byte("listen: 127.0.0.1:8080\nagents:\n  - name: script\n    adapter: script\nforges: []\n"), 0o600))
	out, err = demo()
	require.ErrorAs(t, err, &exit, out)
	require.Equal(t, 3, exit.ExitCode())
	require.Contains(t, out, "no forge configured in alfred.yaml")
}

// syncBuffer is a bytes.Buffer safe for the demo's goroutines and the test together.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The demo make run starts without a forge: the stand-in Forgejo run in the process, Alfred
// on the embedded store with the script agent in Docker (deploy/demo/script.yaml), the doctor
// passing first. The issue goes from its assignment to a merged pull request with only the
// newcomer's two steps, one by `alfred demo answer`, one by the page's form; the demo's CI
// passes the head and Alfred merges it. With --transport poll the stand-in has no webhook and
// sends no delivery: every change reaches Alfred through its polls (the doctor says so), and
// Alfred receives no delivery at all.
func TestDemoPlaysAnIssueToAMergedPullRequest(t *testing.T) {
	t.Parallel()
	image := scriptImage(t)
	for _, transport := range []string{config.TransportWebhook, config.TransportPoll} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			playDemo(t, image, transport)
		})
	}
}

// playDemo plays the demo with the forge's transport (webhook or poll) to the merge.
func playDemo(t *testing.T, image, transport string) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	a := &app{stdout: out, stderr: out}
	d, err := a.startDemo(ctx, demoOptions{dir: filepath.Join(t.TempDir(), "demo"), listen: "127.0.0.1:0",
		adminListen: "127.0.0.1:0", forgeListen: "127.0.0.1:0", image: image, script: "../../deploy/demo/script.yaml",
		transport: transport})
	require.NoError(t, err, out.String())
	t.Cleanup(func() {
		cancel()
		require.NoError(t, d.wait())
	})
	require.Contains(t, out.String(), "alfred doctor passed")
	if transport == config.TransportPoll {
		require.Contains(t, out.String(), "demo: alfred doctor: forge forgejo: transport: poll: the bot's notifications answer",
			"the doctor names the transport and its poll works")
		yaml, err := os.ReadFile(filepath.Join(d.dir, "alfred.yaml"))
		require.NoError(t, err)
		require.Contains(t, string(yaml), "transport: poll\n    poll_interval: 2s")
		require.NotContains(t, string(yaml), "webhook_secret")
		req, err := http.NewRequest(http.MethodGet, d.forgeURL+"/api/v1/repos/"+demo.Repo+"/hooks", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "token "+d.forge.Token())
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		hooks, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", hooks)
		require.JSONEq(t, "[]", string(hooks), "the stand-in's repository has no webhook")
	}
	require.NoError(t, d.forge.Open(ctx))
	go d.forge.Run(ctx)
	waitFor := func(what string, ok func(demo.Status) bool) {
		t.Helper()
		require.Eventually(t, func() bool { return ok(d.forge.Status()) }, 3*time.Minute, 200*time.Millisecond,
			"%s never came; the demo said:\n%s", what, out.String())
	}
	label := func(l string) func(demo.Status) bool { return func(s demo.Status) bool { return s.Label == l } }

	waitFor("the question", func(s demo.Status) bool {
		return s.Label == "status::waiting_info" &&
			slices.ContainsFunc(s.Comments, func(c forge.Comment) bool { return strings.Contains(c.Body, "### q1.") })
	})
	require.Eventually(t, func() bool {
		return strings.Contains(out.String(), "./bin/alfred demo answer --url "+strings.TrimSuffix(d.forgeURL, "/")+" q1 b")
	}, time.Minute, 100*time.Millisecond, "the console says how to answer this demo:\n%s", out.String())
	var cmdOut bytes.Buffer
	require.Equal(t, 1, run(ctx, []string{"demo", "validate", "--url", d.forgeURL}, &cmdOut, &cmdOut), cmdOut.String())
	require.Contains(t, cmdOut.String(), "no plan waits for validation", "validating before the plan says why it cannot")
	cmdOut.Reset()
	require.Equal(t, 0, run(ctx, []string{"demo", "answer", "--url", d.forgeURL, "q1", "b"}, &cmdOut, &cmdOut), cmdOut.String())
	waitFor("the plan", label("status::waiting_validation"))
	require.Contains(t, d.forge.Status().Body, "b. Semicolon", "the answer became a decision")

	// A form of another site may not act as alice; the page's own form may.
	req, err := http.NewRequest(http.MethodPost, d.forgeURL+"/validate", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	req, err = http.NewRequest(http.MethodPost, d.forgeURL+"/validate", strings.NewReader(""))
	require.NoError(t, err)
	req.Header.Set("Origin", d.forgeURL)
	req.Header.Set("Accept", "text/html")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Empty(t, resp.Request.URL.RawQuery, "the page shows no error")

	waitFor("the merge", func(s demo.Status) bool { return s.Label == "status::done" && s.Merged != 0 })
	st := d.forge.Status()
	require.Len(t, st.PullRequests, 1)
	show, err := exec.Command("git", "-C", d.forge.Repository(), "show", st.PullRequests[0].SourceBranch+":export.csv").CombinedOutput()
	require.NoError(t, err, "%s", show)
	require.Equal(t, "date;amount;category\n", string(show), "the script's change is on the pull request's branch")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "done: Alfred merged pull request") },
		time.Minute, 100*time.Millisecond, "the console says it is done:\n%s", out.String())
	resp, err = http.Get(d.forgeURL + "/")
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, string(page), fmt.Sprintf("Done: pull request #%d was merged", st.Merged))
	received := testutil.CollectAndCount(d.srv.metrics.Registry(), "alfred_webhook_deliveries_total")
	if transport == config.TransportPoll {
		require.Zero(t, d.forge.Deliveries(), "the stand-in sent no delivery")
		require.Zero(t, received, "Alfred received no delivery: every change came by its polls")
	} else {
		require.Equal(t, 3, d.forge.Deliveries(), "the assignment, the answer and the validation")
		require.NotZero(t, received)
	}
	requireNoLeftovers(t, d.srv.cfg.DataDir)
}
