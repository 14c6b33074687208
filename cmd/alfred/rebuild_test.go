package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// TestStoreDeletedWhileQuestionsAreOpen runs `alfred serve` (SQLite) until an issue's type
// question is open, stops it, deletes the database and starts it again: the start-up says the
// store is empty and rebuilds the mailbox from the forge, and the start-up reconciliation pass
// that follows posts nothing (no second acknowledgement, no second question block, no new
// assignment). `alfred rebuild` afterwards finds the mailbox there and stores nothing.
func TestStoreDeletedWhileQuestionsAreOpen(t *testing.T) {
	t.Parallel()
	_ = runtimetest.Client(t) // serve needs the Docker engine
	bin := servetest.Binary(t)

	fj := forgetest.NewForgejoServer(t)
	fj.AddUser("alice")
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	const repo = "acme/shop"
	fj.AddRepo(repo, "main", "https://example.invalid/acme/shop.git")
	fj.SetAccess(repo, "alice", true)
	fj.SetAccessLevel(repo, forgetest.BotLogin, 40) // a repository admin reads the hooks
	fj.AddHook(repo, forge.Hook{URL: "http://" + addr + "/webhooks/forgejo", ContentType: "json", Active: true, Events: []string{"issues"}})

	script := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(script, []byte("development:\n  summary: nothing\n"), 0o644))
	cfgPath := filepath.Join(dir, "alfred.yaml")
	dataDir := filepath.Join(dir, "data")
	// No type label on the issue: the acknowledgement asks for the type, so no container runs.
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
listen: %s
data_dir: %s
forges:
  - {name: forgejo, kind: forgejo, base_url: %s, token: %s, webhook_secret: %s, bot_user: %s}
agents:
  - {name: script, adapter: script, image: alfred/rebuild-unused:none, script: %s}
phases: {default: script}
workers: {count: 2, lease_ttl: 5s, poll_interval: 100ms, reconcile_interval: 1h}
`, addr, dataDir, fj.URL, fj.Token, liveSecret, forgetest.BotLogin, script)), 0o600))
	logPath := filepath.Join(dir, "serve.log")
	var proc *servetest.Process
	start := func() { proc = servetest.Start(t, servetest.Readyz, "serve", bin, cfgPath, logPath, addr) }
	stop := func() { proc.Stop(t) }
	serveLog := func() string { return proc.Text(t) }

	// Alfred up: the bot is assigned (the start-up pass finds it), acknowledges and asks.
	n := fj.AddIssue(repo, forgetest.SeedIssue{Title: "Export the report as CSV", Body: "Please.", Author: "alice"})
	ref := forge.IssueRef{Forge: "forgejo", Repo: repo, Number: n}
	fj.SetIssueAssignees(ref, "alice", forgetest.BotLogin)
	start()
	asked := func() bool {
		for _, c := range fj.IssueComments(ref) {
			if key, _, _ := mailbox.ParseMarker(c.Body); strings.HasPrefix(key, "questions-") {
				return true
			}
		}
		return false
	}
	require.Eventually(t, asked, e2eWait, 100*time.Millisecond, "the type question was never asked")
	require.Eventually(t, func() bool { return contains(fj.IssueLabels(ref), "status::waiting_info") },
		30*time.Second, 100*time.Millisecond)
	stop()
	before := fj.IssueComments(ref)
	require.Len(t, before, 2, "the acknowledgement and the question block")
	require.Regexp(t, `rebuilt mailboxes from the forge" forge=forgejo issues=1 rebuilt=0 existing=0 skipped=1`, serveLog(),
		"a new database is empty too: the issue Alfred never saw is left to reconciliation")
	first := len(serveLog())

	// The store is lost.
	for _, f := range []string{"alfred.db", "alfred.db-wal", "alfred.db-shm"} {
		require.NoError(t, os.RemoveAll(filepath.Join(dataDir, f)))
	}
	start()
	second := func() string { return serveLog()[first:] }
	require.Contains(t, second(), "the store is empty: rebuilding the mailboxes")
	require.Regexp(t, `rebuilt a mailbox from the forge" issue=forgejo:acme/shop#1 mailbox_id=1 state=waiting_type comments=2 questions=1`, second())
	require.Regexp(t, `rebuilt mailboxes from the forge" forge=forgejo issues=1 rebuilt=1 existing=0 skipped=0`, second())
	// The start-up reconciliation pass, after the rebuild, is the signal that Alfred had its
	// chance to post again.
	require.Eventually(t, func() bool { return strings.Contains(second(), "msg=reconciled") },
		e2eWait, 100*time.Millisecond, "the start-up reconciliation pass never ended")
	require.Regexp(t, `msg=reconciled forge=forgejo mailboxes=1 new_assignments=0 discovered=0 events=0`, second())
	stop()
	after := fj.IssueComments(ref)
	require.Equal(t, len(before), len(after), "nothing is posted twice, nothing is asked again")
	for i := range before {
		require.Equal(t, before[i].Body, after[i].Body)
	}
	require.Equal(t, []string{"status::waiting_info"}, statusOf(fj.IssueLabels(ref)))

	// On demand, again: the mailbox is there, nothing is rebuilt.
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "rebuild", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s", stderr.String())
	require.Contains(t, stdout.String(), "forgejo: 1 open issues assigned to the bot, 0 mailboxes rebuilt, 1 already there, 0 skipped")
}

// statusOf keeps the status:: labels of labels.
func statusOf(labels []string) []string {
	var out []string
	for _, l := range labels {
		if strings.HasPrefix(l, "status::") {
			out = append(out, l)
		}
	}
	return out
}

// TestServeAliveWhileRebuildWaits: with an empty store and a forge that does not answer, the
// start-up rebuild waits for the forge, and meanwhile the webhook port answers: /healthz 200
// (a liveness probe keeps the process), /readyz 503, and a delivery is stored and answered 202
// (store first). Then the forge comes back: the rebuild ends, and the assignment stored while
// it waited is applied, once: Alfred takes the issue (its status label) and posts no comment
// twice.
func TestServeAliveWhileRebuildWaits(t *testing.T) {
	t.Parallel()
	_ = runtimetest.Client(t) // serve needs the Docker engine
	bin := servetest.Binary(t)
	dir := t.TempDir()
	closed := freeAddr(t) // nothing listens there: the forge is down, until the test serves fj there
	addr := freeAddr(t)
	fj := forgetest.NewForgejoHandler("http://" + closed)
	const repo = "alice/sandbox" // alice owns it: her assignment passes the gate
	fj.AddUser("alice")
	fj.AddRepo(repo, "main", "")
	fj.SetAccessLevel(repo, forgetest.BotLogin, 40) // a repository admin reads roles and hooks
	n := fj.AddIssue(repo, forgetest.SeedIssue{Title: "Export the report as CSV", Body: "Please.", Author: "alice"})
	issue := forge.IssueRef{Forge: "forgejo", Repo: repo, Number: n}
	fj.SetIssueAssignees(issue, "alice", forgetest.BotLogin)
	script := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(script, []byte("development:\n  summary: nothing\n"), 0o644))
	cfgPath := filepath.Join(dir, "alfred.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
listen: %s
data_dir: %s
forges:
  - {name: forgejo, kind: forgejo, base_url: http://%s, token: %s, webhook_secret: %s, bot_user: %s}
agents:
  - {name: script, adapter: script, image: alfred/rebuild-unused:none, script: %s}
phases: {default: script}
`, addr, filepath.Join(dir, "data"), closed, fj.Token, liveSecret, forgetest.BotLogin, script)), 0o600))
	// Never ready while the rebuild waits: the test waits for the rebuild's log line instead.
	proc := servetest.Start(t, servetest.NoProbe, "serve", bin, cfgPath, filepath.Join(dir, "serve.log"), addr)
	require.Eventually(t, func() bool {
		return strings.Contains(proc.Text(t), "the rebuild from the forge waits for the forge")
	}, e2eWait, 100*time.Millisecond, "the rebuild never waited for the forge")

	// A request that is never answered fails the test within the client's timeout.
	client := &http.Client{Timeout: 30 * time.Second}
	get := func(path string) (int, string) {
		resp, err := client.Get("http://" + addr + path)
		require.NoError(t, err, "the port answers while the rebuild waits")
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, _ := get("/healthz")
	require.Equal(t, http.StatusOK, code)
	code, body := get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "rebuilding")
	// Store first (issue 25): a delivery is stored and answered 202 while the rebuild waits,
	// which never ends here; it is applied after the rebuild.
	payload, err := os.ReadFile(filepath.Join(forgetest.FixtureDir(t, forge.KindForgejo), "gitea", "issue_comment_created.json"))
	require.NoError(t, err)
	req := forgetest.NewForgejoRequest("http://"+addr+"/webhooks/forgejo", "issue_comment", "during-rebuild-1", liveSecret, payload)
	resp, err := client.Do(req)
	require.NoError(t, err, "a delivery is answered while the rebuild waits")
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", b)
	assign := forgetest.NewForgejoRequest("http://"+addr+"/webhooks/forgejo", "issue_assign", "during-rebuild-2", liveSecret,
		fj.IssueHook(issue, "assigned", "alice"))
	resp, err = client.Do(assign)
	require.NoError(t, err, "a delivery is answered while the rebuild waits")
	b, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, "%s", b)
	require.Empty(t, fj.IssueComments(issue), "nothing is applied while the rebuild waits")

	// The forge comes back at its address: the rebuild ends and the stored assignment is
	// applied.
	ln, err := net.Listen("tcp", closed)
	require.NoError(t, err, "the forge's address was taken meanwhile")
	srv := &http.Server{Handler: fj, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	require.Eventually(t, func() bool {
		for _, l := range fj.IssueLabels(issue) {
			if strings.HasPrefix(l, "status::") {
				return true
			}
		}
		return false
	}, e2eWait, 100*time.Millisecond, "the assignment stored during the rebuild was never applied")
	require.Eventually(t, func() bool { return len(fj.IssueComments(issue)) > 0 }, e2eWait, 100*time.Millisecond,
		"Alfred never acknowledged the issue")
	seen := map[string]bool{}
	for _, c := range fj.IssueComments(issue) {
		require.False(t, seen[c.Body], "a comment posted twice: %s", c.Body)
		seen[c.Body] = true
	}
}
