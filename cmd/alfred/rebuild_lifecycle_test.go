package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/internal/store"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// TestStoreDeletedAtEachStateContinuesToDone runs the lifecycle of TestLifecycleForgejo-
// RecordedDeliveries (real Docker, the script agent, a real git repository, the Forgejo
// stand-in, SQLite) up to one state — questions open, plan posted, in CI, in review — then
// stops Alfred, deletes its database and starts it again: the mailbox is rebuilt from the
// forge and the issue goes on to done through the same deliveries, with no comment posted
// twice and no phase run again (the new store's runs are only the phases still to run).
func TestStoreDeletedAtEachStateContinuesToDone(t *testing.T) {
	t.Parallel()
	_ = runtimetest.Client(t)
	agents, _ := scriptAgents(t, lifecycleScript)
	const repo = "acceptance/sandbox"
	for _, c := range []struct {
		name  string
		upTo  int      // the steps run before the store is lost
		after []string // the runs of the new store, in order
	}{
		{"questions_open", 1, []string{"analysis.technical", "development"}},
		{"plan_posted", 2, []string{"development"}},
		{"in_ci", 3, nil},
		{"in_review", 4, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := startE2EConfig(t, storeSQLite, forge.KindForgejo, repo, 24*time.Hour, agents, func(cfg *config.Config) {
				// A new store knows the repository by no mailbox and the stand-in has no hook
				// to this Alfred: the repository is listed.
				cfg.Forges[0].Repositories = []string{repo}
				// The stand-in's token is BotLogin's: the bot must be the account that posts,
				// so that its marked comments are found as its own.
				cfg.Forges[0].BotUser = forgetest.BotLogin
			})
			e.forgejo.SetIssueAssignees(e.issue, "alice", forgetest.BotLogin)
			ctx := context.Background()
			steps := []func(){
				func() { // the type, then the question block
					require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", func(doc map[string]any) {
						is := doc["issue"].(map[string]any)
						is["assignee"].(map[string]any)["login"] = forgetest.BotLogin
						is["assignees"].([]any)[0].(map[string]any)["login"] = forgetest.BotLogin
					}))
					e.waitStatus("status::waiting_info")
					require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
					require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated", nil))
					require.Eventually(t, func() bool { return strings.Contains(strings.Join(e.comments(), "\n"), "### q1. Which separator?") },
						e2eWait, 100*time.Millisecond)
					e.waitStatus("status::waiting_info")
				},
				func() { // the answer, then the plan
					require.Equal(t, http.StatusAccepted, e.send("006-issue_comment-created", func(doc map[string]any) {
						doc["comment"].(map[string]any)["body"] = "q1: b"
						doc["comment"].(map[string]any)["id"] = 4242
					}))
					e.waitStatus("status::waiting_validation")
				},
				func() { // the validation, then the development and the merge request
					require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
					require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated",
						setLabels(e.forgejo.IssueLabels(e.issue)...)))
					e.waitStatus("status::in_ci")
					// The stand-in does not see the push to the bare repository: it is told the
					// branch's head, as a forge would report it on the merge request.
					mrs := e.forgejo.MergeRequests(repo)
					require.Len(t, mrs, 1)
					head, err := exec.Command("git", "-C", e.bare, "rev-parse", mrs[0].SourceBranch).Output()
					require.NoError(t, err)
					e.forgejo.(branchSetter).SetBranch(repo, mrs[0].SourceBranch, strings.TrimSpace(string(head)))
				},
				func() { // CI passes
					mrs := e.forgejo.MergeRequests(repo)
					require.Len(t, mrs, 1)
					head, err := exec.Command("git", "-C", e.bare, "rev-parse", mrs[0].SourceBranch).Output()
					require.NoError(t, err)
					e.forgejo.SetCI(repo, strings.TrimSpace(string(head)), forgetest.CIJob{Name: "ci/test", State: forge.CISuccess})
					e.waitStatus("status::in_review")
				},
				func() { // merged
					mrs := e.forgejo.MergeRequests(repo)
					require.Len(t, mrs, 1)
					mr := mrs[0]
					e.forgejo.MarkMerged(repo, mr.Number)
					require.Equal(t, http.StatusAccepted, e.send("022-pull_request-closed", func(doc map[string]any) {
						doc["number"] = mr.Number
						doc["pull_request"].(map[string]any)["number"] = mr.Number
						doc["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = mr.SourceBranch
					}))
					require.Equal(t, http.StatusAccepted, e.send("023-issues-closed", nil))
					e.waitStatus("status::done")
				},
			}
			for _, step := range steps[:c.upTo] {
				step()
			}
			// Wait for the pass that moved the label to save the mailbox and end: the comments
			// are all posted then.
			waitIdle(t, e)
			before := len(e.comments())

			e = e.restartWithoutStore()
			require.Len(t, e.comments(), before, "the restart posted nothing")
			for _, step := range steps[c.upTo:] {
				step()
			}
			e.requireUniqueMarkers()
			require.Equal(t, []string{"status::done"}, e.statusLabels())
			require.Equal(t, c.after, runKeys(t, e), "no phase done before the loss ran again")
		})
	}
}

// branchSetter is the stand-ins' SetBranch (forgetest.MergeSeeder's).
type branchSetter interface {
	SetBranch(repo, branch, sha string)
}

// waitIdle waits until no mailbox of e's store holds a lease or has a run running: the pass in
// progress has ended.
func waitIdle(t *testing.T, e *e2e) {
	t.Helper()
	db := openTestDatabase(t, e.srv.cfg.DatabaseURL.Reveal(), e.srv.cfg.DataDir)
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, db.Get(&n, `SELECT count(*) FROM mailboxes WHERE lease_owner IS NOT NULL`))
		var r int
		require.NoError(t, db.Get(&r, `SELECT count(*) FROM runs WHERE status = 'running'`))
		return n == 0 && r == 0
	}, e2eWait, 50*time.Millisecond, "a pass never ended")
}

// runKeys returns the runs of e's store, oldest first, as phase keys.
func runKeys(t *testing.T, e *e2e) []string {
	t.Helper()
	db := openTestDatabase(t, e.srv.cfg.DatabaseURL.Reveal(), e.srv.cfg.DataDir)
	var rows []struct {
		Phase string `db:"phase"`
		Step  string `db:"step"`
	}
	require.NoError(t, db.Select(&rows, `SELECT phase, step FROM runs ORDER BY id`))
	var out []string
	for _, r := range rows {
		out = append(out, phase.KeyOf(phase.Phase(r.Phase), phase.Step(r.Step)))
	}
	return out
}

// restartWithoutStore stops e's Alfred, deletes its SQLite database and starts a new Alfred on
// the same configuration, ready when Serve has rebuilt the store (its webhook port answers).
// It returns the e2e of the new Alfred; e's own clean-up still runs.
func (e *e2e) restartWithoutStore() *e2e {
	t := e.t
	t.Helper()
	cfg := e.srv.cfg
	e.cancel()
	err := <-e.done
	require.NoError(t, err)
	e.done <- err // e's clean-up reads it again
	require.NoError(t, e.srv.Close())
	_, path := store.Engine(cfg.DatabaseURL.Reveal(), cfg.DataDir)
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		require.NoError(t, os.RemoveAll(f))
	}

	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv, err := newServer(context.Background(), cfg, log)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(context.Background())
	next := *e
	next.srv, next.url, next.cancel, next.done = srv, "http://"+ln.Addr().String(), cancel, make(chan error, 1)
	go func() { next.done <- srv.Serve(runCtx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-next.done
		_ = srv.Close()
	})
	require.Eventually(t, func() bool {
		resp, err := http.Get(next.url + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, e2eWait, 50*time.Millisecond, "the restarted Alfred never became ready")
	empty, err := srv.store.Empty(context.Background())
	require.NoError(t, err)
	require.False(t, empty, "the store was rebuilt before the webhook port answered")
	return &next
}
