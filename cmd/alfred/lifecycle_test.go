package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/admin"
	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/web"
	"github.com/alfred-bot/alfred/mailbox"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/forgetest/recorded"
	"github.com/alfred-bot/alfred/webhook/gitlab"
)

// The recorded Forgejo deliveries were signed with this secret (see their README).
const liveSecret = "acceptance-webhook-secret"

// e2eAdminToken is the admin token of the in-process servers.
const e2eAdminToken = "e2e-admin-token-5c1f"

const lifecycleScript = `
analysis.functional:
  summary: Understood.
  understanding: You want the report exported as a CSV file.
  questions:
    - id: q1
      title: Which separator?
      context: Spreadsheets in some locales expect semicolons.
      options:
        - {id: a, label: Comma, description: RFC 4180}
        - {id: b, label: Semicolon, description: what Excel expects in Europe}
      default: a
  expected_behaviour: An Export button downloads report.csv.
  acceptance_criteria: [the file opens in a spreadsheet]
  out_of_scope: [PDF export]
analysis.technical:
  summary: Planned.
  plan: |
    1. Add export.csv with the header row.
    2. Wire the Export button.
development:
  summary: Added the CSV export.
  commit_message: "Add CSV export"
  log: ["writing export.csv"]
  files:
    export.csv: "date;amount;category\n"
ci_fix:
  summary: Fixed the test.
  commit_message: "Fix the export test"
  files:
    export_test.txt: "fixed\n"
`

// e2e is a wired Alfred (newServer) against the Forgejo stand-in, the store under test (SQLite
// or PostgreSQL), real Docker and a real bare git repository, fed with the recorded deliveries.
type e2e struct {
	t       testing.TB
	srv     *server
	url     string
	forgejo forgetest.Seeder // the stand-in forge (Forgejo or GitLab)
	api     forge.Forge      // acts as the humans do, through the stand-in's API
	kind    forge.Kind
	bare    string
	issue   forge.IssueRef
	cancel  context.CancelFunc
	done    chan error
}

// startE2E wires Alfred on the default store (SQLite) to a Forgejo stand-in.
func startE2E(t *testing.T, deadline time.Duration) *e2e {
	return startE2EOn(t, storeSQLite, forge.KindForgejo, "acceptance/sandbox", deadline)
}

// startE2EOn wires Alfred on store (storeSQLite or storePostgres) to a stand-in of kind
// holding repo with issue #1 by alice, the bot assigned.
func startE2EOn(t *testing.T, store string, kind forge.Kind, repo string, deadline time.Duration) *e2e {
	t.Helper()
	agents, _ := scriptAgents(t, lifecycleScript)
	return startE2EWith(t, store, kind, repo, deadline, agents)
}

// scriptAgents builds the script agent's image and returns the agents and phases configuration
// that runs script with it in every phase, and the image.
func scriptAgents(tb testing.TB, script string) (agents, image string) {
	tb.Helper()
	image = scriptImage(tb)
	scriptPath := filepath.Join(tb.TempDir(), "script.yaml")
	require.NoError(tb, os.WriteFile(scriptPath, []byte(script), 0o644))
	return fmt.Sprintf(`
agents:
  - name: script
    adapter: script
    image: %s
    script: %s
phases:
  default: script
`, image, scriptPath), image
}

// startE2EWith is startE2EOn with the given agents and phases configuration; env are more
// ALFRED_* variables ("ALFRED_LIFECYCLE_REVIEW_QUIET=1s").
func startE2EWith(t testing.TB, store string, kind forge.Kind, repo string, deadline time.Duration, agents string, env ...string) *e2e {
	t.Helper()
	return startE2EConfig(t, store, kind, repo, deadline, agents, nil, env...)
}

// startE2EConfig is startE2EWith with mutate (when not nil) applied to the loaded
// configuration before the server is built: a setting Load would refuse.
func startE2EConfig(t testing.TB, store string, kind forge.Kind, repo string, deadline time.Duration, agents string, mutate func(*config.Config), env ...string) *e2e {
	t.Helper()
	dsn := testDatabaseURL(t, store)
	ctx := context.Background()
	dir := t.TempDir()
	bare := seedBareRepo(t, dir)
	var (
		seeder     forgetest.Seeder
		url, token string
		api        forge.Forge
		err        error
	)
	switch kind {
	case forge.KindGitLab:
		gl := forgetest.NewGitLabServer(t)
		seeder, url, token = gl, gl.URL, gl.Token
		api, err = gitlab.NewClient(gitlab.ClientConfig{BaseURL: url, Token: token})
	default:
		fj := forgetest.NewForgejoServer(t)
		seeder, url, token = fj, fj.URL, fj.Token
		api, err = forgejo.NewClient(forgejo.ClientConfig{BaseURL: url, Token: token})
	}
	require.NoError(t, err)
	issue := forgetest.SeedAcceptance(t, seeder, string(kind), repo, bare)

	cfgPath := filepath.Join(dir, "alfred.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
data_dir: %s
forges:
  - name: %s
    kind: %s
    base_url: %s
    token: %s
    webhook_secret: %s
    bot_user: bot
%s
lifecycle:
  question_deadline: %s
  ci_wait: 1h
  ci_poll: 300ms
workers:
  count: 2
  lease_ttl: 5s
  poll_interval: 100ms
admin:
  token: %s
`, filepath.Join(dir, "data"), kind, kind, url, token, liveSecret, agents, deadline, e2eAdminToken)), 0o600))
	cfg, err := config.Load(cfgPath, append([]string{"ALFRED_DATABASE_URL=" + dsn}, env...))
	require.NoError(t, err)
	if mutate != nil {
		mutate(cfg)
	}

	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := newServer(ctx, cfg, log)
	require.NoError(t, err)
	require.EqualValues(t, store, srv.store.Dialect().Name, "the store under test")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	e := &e2e{t: t, srv: srv, url: "http://" + ln.Addr().String(), forgejo: seeder, api: api, kind: kind,
		bare: bare, issue: issue, cancel: cancel,
		done: make(chan error, 1)}
	go func() { e.done <- srv.Serve(runCtx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-e.done
		_ = srv.Close()
	})
	return e
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// seedBareRepo creates dir/sandbox.git with one commit on main and returns its path.
func seedBareRepo(t testing.TB, dir string) string {
	t.Helper()
	bare := filepath.Join(dir, "sandbox.git")
	forgetest.SeedBareRepo(t, bare)
	return bare
}

// send posts a recorded delivery. With edit nil the body and its headers go out byte for byte,
// original signature included; otherwise the JSON is edited, re-signed and given a new
// delivery id, as a new delivery from the same server would be.
func (e *e2e) send(fixture string, edit func(map[string]any)) int {
	e.t.Helper()
	return e.sendFrom("forgejo-live", fixture, edit)
}

// sendFrom is send with a recorded delivery of the Forgejo fixture set set.
func (e *e2e) sendFrom(set, fixture string, edit func(map[string]any)) int {
	e.t.Helper()
	h, body, err := recorded.Load(filepath.Join(forgetest.FixtureDir(e.t, forge.KindForgejo), set, fixture+".json"))
	require.NoError(e.t, err)
	if edit != nil {
		var doc map[string]any
		require.NoError(e.t, json.Unmarshal(body, &doc))
		edit(doc)
		body, err = json.MarshalIndent(doc, "", "  ")
		require.NoError(e.t, err)
		sig := forgejo.Sign(liveSecret, body)
		id := uuid.NewString()
		for _, k := range []string{"X-Forgejo-Signature", "X-Gitea-Signature", "X-Gogs-Signature"} {
			h.Set(k, sig)
		}
		for _, k := range []string{"X-Forgejo-Delivery", "X-Gitea-Delivery", "X-Gogs-Delivery", "X-GitHub-Delivery"} {
			h.Set(k, id)
		}
		h.Del("X-Hub-Signature")
		h.Del("X-Hub-Signature-256")
	}
	return e.post(fixture, h, body)
}

// post sends a delivery with its headers and returns the status code.
func (e *e2e) post(name string, h http.Header, body []byte) int {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/webhooks/"+string(e.kind), bytes.NewReader(body))
	require.NoError(e.t, err)
	for k, vs := range h {
		if k == "Content-Length" || k == "Host" {
			continue
		}
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	e.t.Logf("POST %s → %d %s", name, resp.StatusCode, bytes.TrimSpace(b))
	return resp.StatusCode
}

func (e *e2e) waitStatus(want string) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		for _, l := range e.forgejo.IssueLabels(e.issue) {
			if l == want {
				return true
			}
		}
		return false
	}, e2eWait, 100*time.Millisecond, "status %s never came; labels %v; comments:\n%s", want,
		e.forgejo.IssueLabels(e.issue), strings.Join(e.comments(), "\n---\n"))
}

func (e *e2e) comments() []string {
	var out []string
	for _, c := range e.forgejo.IssueComments(e.issue) {
		out = append(out, c.Body)
	}
	return out
}

func (e *e2e) statusLabels() []string {
	var out []string
	for _, l := range e.forgejo.IssueLabels(e.issue) {
		if strings.HasPrefix(l, "status::") {
			out = append(out, l)
		}
	}
	return out
}

func (e *e2e) requireUniqueMarkers() {
	e.t.Helper()
	seen := map[string]bool{}
	for _, c := range e.comments() {
		if k, _, ok := mailbox.ParseMarker(c); ok {
			require.False(e.t, seen[k], "comment %s posted twice", k)
			seen[k] = true
		}
	}
}

func setLabels(names ...string) func(map[string]any) {
	return func(doc map[string]any) {
		var ls []any
		for i, n := range names {
			ls = append(ls, map[string]any{"id": 100 + i, "name": n, "color": "ededed", "exclusive": false})
		}
		doc["issue"].(map[string]any)["labels"] = ls
	}
}

// TestLifecycleForgejoRecordedDeliveries runs the whole lifecycle on each store.
func TestLifecycleForgejoRecordedDeliveries(t *testing.T) {
	t.Parallel()
	for _, store := range e2eStores {
		t.Run("store="+store, func(t *testing.T) {
			t.Parallel()
			lifecycleForgejoRecordedDeliveries(t, startE2EOn(t, store, forge.KindForgejo, "acceptance/sandbox", 24*time.Hour))
		})
	}
}

func lifecycleForgejoRecordedDeliveries(t *testing.T, e *e2e) {
	ctx := context.Background()

	// alice assigns the bot: the recorded delivery, byte for byte with its real signature.
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", nil))
	require.Equal(t, http.StatusOK, e.send("002-issue_assign-assigned", nil), "a redelivery is a duplicate")
	e.waitStatus("status::waiting_info")
	require.Contains(t, e.comments()[0], "Thanks @alice, I am on it")
	require.Contains(t, e.comments()[1], "What kind of work is this issue?")

	// alice adds type::task (recorded delivery 003; the forge holds the label first).
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated", nil))
	require.Eventually(t, func() bool { return strings.Contains(strings.Join(e.comments(), "\n"), "### q1. Which separator?") },
		e2eWait, 100*time.Millisecond, "no question block:\n%s", strings.Join(e.comments(), "\n---\n"))
	e.waitStatus("status::waiting_info")
	block := e.comments()[len(e.comments())-1]
	require.Contains(t, block, "- [x] **a. Comma** _(default)_")
	require.Contains(t, block, "Without an answer by ")

	// alice answers "q1: b" in a comment (recorded delivery 006 with her new text).
	require.Equal(t, http.StatusAccepted, e.send("006-issue_comment-created", func(doc map[string]any) {
		doc["comment"].(map[string]any)["body"] = "q1: b 👍"
		doc["comment"].(map[string]any)["id"] = 4242
	}))
	e.waitStatus("status::waiting_validation")
	body := e.forgejo.IssueBody(e.issue)
	require.True(t, strings.HasPrefix(body, "The monthly report should be downloadable."))
	require.Contains(t, body, "| q1. Which separator? | b. Semicolon | @alice |")
	require.Contains(t, e.comments()[len(e.comments())-1], "Add the `ai::validate_plan` label to let me start")

	// alice adds ai::validate_plan.
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated",
		setLabels(e.forgejo.IssueLabels(e.issue)...)))
	e.waitStatus("status::in_ci")
	require.Contains(t, strings.Join(e.comments(), "\n"), "Plan validated by @alice. Starting the development.")
	mrs := e.forgejo.MergeRequests("acceptance/sandbox")
	require.Len(t, mrs, 1)
	mr := mrs[0]
	require.Equal(t, "agent/issue-1-export-the-report-as-csv", mr.SourceBranch)
	require.Contains(t, mr.Body, "Closes #1")
	require.Contains(t, e.comments()[len(e.comments())-1], fmt.Sprintf("I opened pull request #%d", mr.Number))
	// The scripted change is on the branch, committed by the bot identity, in the bare repo.
	out, err := exec.Command("git", "-C", e.bare, "show", mr.SourceBranch+":export.csv").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "date;amount;category\n", string(out))
	out, err = exec.Command("git", "-C", e.bare, "log", "-1", "--format=%s|%an", mr.SourceBranch).CombinedOutput()
	require.NoError(t, err)
	require.Equal(t, "Add CSV export|Alfred", strings.TrimSpace(string(out)))

	// CI succeeds on the head commit: Forgejo sends no status webhook, Alfred polls.
	head, err := exec.Command("git", "-C", e.bare, "rev-parse", mr.SourceBranch).Output()
	require.NoError(t, err)
	e.forgejo.SetCI("acceptance/sandbox", strings.TrimSpace(string(head)), forgetest.CIJob{Name: "ci/test", State: forge.CISuccess})
	e.waitStatus("status::in_review")

	// alice merges: recorded deliveries 022 (pull request closed, merged) and 023 (issue closed).
	e.forgejo.MarkMerged("acceptance/sandbox", mr.Number)
	require.Equal(t, http.StatusAccepted, e.send("022-pull_request-closed", func(doc map[string]any) {
		doc["number"] = mr.Number
		doc["pull_request"].(map[string]any)["number"] = mr.Number
		doc["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = mr.SourceBranch
	}))
	require.Equal(t, http.StatusAccepted, e.send("023-issues-closed", nil))
	e.waitStatus("status::done")
	require.Equal(t, []string{"status::done"}, e.statusLabels())
	require.Eventually(t, func() bool { return !contains(e.forgejo.IssueAssignees(e.issue), "bot") },
		30*time.Second, 100*time.Millisecond, "the bot unassigns itself")
	e.requireUniqueMarkers()
	requireNoLeftovers(t, e.srv.cfg.DataDir)

	// The session status endpoint: the script agent keeps no session. It is on the admin
	// listener only, behind the admin token.
	resp, err := http.Get(e.url + "/mailboxes/1/session")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the webhook port shows no state")
	adminGet := func(path, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		e.srv.admin.ServeHTTP(w, r)
		return w
	}
	w := adminGet("/mailboxes/1/session", "")
	require.Equal(t, http.StatusUnauthorized, w.Code, "the status page refuses a request without the token")
	require.NotContains(t, w.Body.String(), mr.SourceBranch)
	require.Equal(t, http.StatusUnauthorized, adminGet("/mailboxes/1/session", "wrong").Code)
	// The labels and the assignees are written before the pass saves the mailbox: wait for
	// the saved state.
	var st admin.SessionStatus
	require.Eventually(t, func() bool {
		w := adminGet("/mailboxes/1/session", e2eAdminToken)
		require.Equal(t, http.StatusOK, w.Code)
		st = admin.SessionStatus{}
		require.NoError(t, json.NewDecoder(w.Body).Decode(&st))
		return st.State == mailbox.StateDone
	}, 30*time.Second, 50*time.Millisecond, "the mailbox was never saved done")
	require.Equal(t, mr.SourceBranch, st.Branch)
	require.False(t, st.IsResumable)
	require.Equal(t, admin.ReasonMissingResumeToken, st.ResumeReason)
	require.Equal(t, http.StatusNotFound, adminGet("/mailboxes/999/session", e2eAdminToken).Code)
}

func TestLifecycleForgejoDeadlineAppliesDefaults(t *testing.T) {
	t.Parallel()
	e := startE2E(t, 2*time.Second)
	ctx := context.Background()
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	// No reply: the deadline passes and the defaults apply.
	e.waitStatus("status::waiting_validation")
	all := strings.Join(e.comments(), "\n")
	require.Contains(t, all, "so I applied the defaults:\n\n- **q1. Which separator?** → a. Comma")
	require.Contains(t, e.forgejo.IssueBody(e.issue), "| q1. Which separator? | a. Comma | default |")
	e.requireUniqueMarkers()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// requireNoLeftovers checks that no container of this test's Alfred (its instance label,
// derived from dataDir) is left and no worktree is left; other tests' containers do not count.
func requireNoLeftovers(t *testing.T, dataDir string) {
	t.Helper()
	cli := runtimetest.Client(t)
	require.Eventually(t, func() bool {
		list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true,
			Filters: filters.NewArgs(filters.Arg("label", "alfred.managed=true"),
				filters.Arg("label", "alfred.instance="+runner.InstanceID(dataDir)))})
		require.NoError(t, err)
		return len(list) == 0
	}, 30*time.Second, 200*time.Millisecond, "an Alfred container was left behind")
	entries, _ := os.ReadDir(filepath.Join(dataDir, "worktrees"))
	require.Empty(t, entries, "a worktree was left behind")
}

// toRunningDevelopment takes the issue as a task through its plan's validation and waits until
// the development run is running in a container and ready(run) holds; it returns the mailbox
// and that run. ready may wait on the container (its state, its log); nil accepts any.
func (e *e2e) toRunningDevelopment(ready func(web.RunSummary) bool) (*mailbox.Mailbox, web.RunSummary) {
	t := e.t
	ctx := context.Background()
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	e.waitStatus("status::waiting_validation")
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated", setLabels(e.forgejo.IssueLabels(e.issue)...)))

	mb, err := e.srv.store.Find(ctx, e.issue)
	require.NoError(t, err)
	var run web.RunSummary
	require.Eventually(t, func() bool {
		d, err := e.srv.store.Mailbox(ctx, mb.ID)
		require.NoError(t, err)
		if len(d.Runs) == 0 {
			return false
		}
		r := d.Runs[len(d.Runs)-1]
		if r.Phase != "development" || !r.Running() || r.Container == "" {
			return false
		}
		run = r
		return ready == nil || ready(r)
	}, 2*time.Minute, 200*time.Millisecond, "the development never ran")
	return mb, run
}
