package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// TestAssignmentWhileDownInRepositoryThatNeverSentAnEvent stops `alfred serve`, creates a
// repository with its webhook set to this Alfred and assigns the bot to an issue there (no
// delivery reaches Alfred: it is down), then starts it again: the start-up reconciliation pass
// finds the repository by its hook and acknowledges the issue, well within one
// reconciliation interval (1h here, so no later pass can be what did it). A repository whose
// hook points at another Alfred, with the bot assigned as well, has only its hooks read. On the
// Forgejo stand-in the hook URL is the one built from listen (no public_url); on GitLab's it is
// public_url's.
func TestAssignmentWhileDownInRepositoryThatNeverSentAnEvent(t *testing.T) {
	t.Parallel()
	_ = runtimetest.Client(t) // serve needs the Docker engine
	bin := servetest.Binary(t)
	for _, kind := range []forge.Kind{forge.KindForgejo, forge.KindGitLab} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			assignmentWhileDownInNewRepository(t, bin, kind)
		})
	}
}

func assignmentWhileDownInNewRepository(t *testing.T, bin string, kind forge.Kind) {
	type standIn interface {
		forgetest.Seeder
		Requests() []string
	}
	var (
		s          standIn
		url, token string
	)
	switch kind {
	case forge.KindGitLab:
		gl := forgetest.NewGitLabServer(t)
		s, url, token = gl, gl.URL, gl.Token
	default:
		fj := forgetest.NewForgejoServer(t)
		s, url, token = fj, fj.URL, fj.Token
	}
	s.AddUser("alice")
	s.SetPageSize(1) // the hooks are read page by page

	dir := t.TempDir()
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		return ln.Addr().String()
	}
	addr, adminAddr := free(), free()
	const adminToken = "discovery-admin-token"
	publicURL := ""
	if kind == forge.KindGitLab {
		publicURL = "public_url: http://" + addr
	}
	script := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(script, []byte("development:\n  summary: nothing\n"), 0o644))
	cfgPath := filepath.Join(dir, "alfred.yaml")
	// No type label on the issues: the acknowledgement asks for the type, so no container runs.
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
listen: %s
%s
admin: {listen: %s, token: %s}
data_dir: %s
forges:
  - {name: %s, kind: %s, base_url: %s, token: %s, webhook_secret: %s, bot_user: %s}
agents:
  - {name: script, adapter: script, image: alfred/discovery-unused:none, script: %s}
phases: {default: script}
workers: {count: 2, lease_ttl: 5s, poll_interval: 100ms, reconcile_interval: 1h}
`, addr, publicURL, adminAddr, adminToken, filepath.Join(dir, "data"), kind, kind, url, token, liveSecret, forgetest.BotLogin, script)), 0o600))
	logPath := filepath.Join(dir, "serve.log")
	var proc *servetest.Process
	start := func() { proc = servetest.Start(t, servetest.Readyz, "serve", bin, cfgPath, logPath, addr) }
	start()
	proc.Stop(t)

	// While Alfred is down: two new repositories, each with a webhook and an issue the bot is
	// assigned to by alice; only the first webhook is this Alfred's.
	assigned := func(repo, hookURL string) forge.IssueRef {
		s.AddRepo(repo, "main", "https://example.invalid/"+repo+".git")
		s.SetAccess(repo, "alice", true)
		s.SetAccessLevel(repo, forgetest.BotLogin, 40) // a repository admin reads the hooks
		s.AddHook(repo, forge.Hook{URL: "https://ci.example/hook", ContentType: "json", Active: true, Events: []string{"push"}})
		s.AddHook(repo, forge.Hook{URL: hookURL, ContentType: "json", Active: true, Events: []string{"issues"}})
		n := s.AddIssue(repo, forgetest.SeedIssue{Title: "Export the report as CSV", Body: "Please.", Author: "alice"})
		ref := forge.IssueRef{Forge: string(kind), Repo: repo, Number: n}
		s.SetIssueAssignees(ref, "alice", forgetest.BotLogin)
		return ref
	}
	ours := assigned("acme/new", "http://"+addr+"/webhooks/"+string(kind))
	theirs := assigned("other/app", "https://other-alfred.example.org/webhooks/"+string(kind))
	before := len(s.Requests())

	start()
	require.Eventually(t, func() bool {
		for _, c := range s.IssueComments(ours) {
			if strings.Contains(c.Body, "Thanks @alice, I am on it") {
				return true
			}
		}
		return false
	}, e2eWait, 100*time.Millisecond, "the assignment in the new repository was never acknowledged")

	// The acknowledgement follows the pass that read the other repository's hooks: by now it
	// has been looked at, and only its hooks were read.
	require.Empty(t, s.IssueComments(theirs))
	require.Equal(t, []string{forgetest.BotLogin}, s.IssueAssignees(theirs))
	var hookReads int
	for _, r := range s.Requests()[before:] {
		if !strings.Contains(r, "other/app") && !strings.Contains(r, "other%2Fapp") {
			continue
		}
		require.Contains(t, r, "/hooks", "another installation's repository is not touched: %s", r)
		hookReads++
	}
	require.GreaterOrEqual(t, hookReads, 2, "its hooks were read, every page")
	b, err := os.ReadFile(logPath)
	require.NoError(t, err)
	require.Contains(t, string(b), "a repository that sent no delivery has this Alfred's webhook")

	req, err := http.NewRequest(http.MethodGet, "http://"+adminAddr+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	metricsText, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	require.Contains(t, string(metricsText), `alfred_reconciliation_findings_total{kind="discovered_repository"} 1`)
}
