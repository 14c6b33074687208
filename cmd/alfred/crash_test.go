package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// crashScript is the script of the crash tests; %s is the development run's first-attempt
// sleep (the container the test kills Alfred under). A second attempt, when there is one, does
// not sleep.
const crashScript = `
analysis.functional:
  summary: Understood.
  understanding: You want the report exported as a CSV file.
analysis.technical:
  summary: Planned.
  plan: Add export.csv.
development:
  summary: Added the CSV export.
  commit_message: "Add CSV export"
  files:
    export.csv: "date,amount\n"
  sleep_seconds: %s
  per_attempt:
    "2": {sleep_seconds: 0}
`

// crashHoldScript is crashScript with the first development attempt held instead of asleep:
// the container runs until the test writes crashRelease into the run's output directory (the
// script agent's wait_for_file), so how long it runs never depends on the machine's load. A
// second attempt, when there is one, is not held.
const crashHoldScript = `
analysis.functional:
  summary: Understood.
  understanding: You want the report exported as a CSV file.
analysis.technical:
  summary: Planned.
  plan: Add export.csv.
development:
  summary: Added the CSV export.
  commit_message: "Add CSV export"
  files:
    export.csv: "date,amount\n"
  wait_for_file: ` + crashRelease + `
  per_attempt:
    "2": {wait_for_file: ""}
`

// crashRelease is the file that releases the held development run of crashHoldScript.
const crashRelease = "crash-release"

// crashCase is one way a development container fares while ` + "`alfred serve`" + ` is down.
type crashCase struct {
	// sleep is the first development attempt's sleep_seconds (crashScript). Empty: the
	// attempt is held (crashHoldScript) and released after the restart, or while Alfred is
	// down with releaseWhileDown.
	sleep string
	// releaseWhileDown releases the held development run (sleep empty) after the kill, before
	// whileDown: the container finishes while Alfred is down.
	releaseWhileDown bool
	// term stops the process with SIGTERM (a clean shutdown) instead of SIGKILL.
	term bool
	// whileDown runs after the SIGKILL, before the restart, with the runtime, the container's
	// id and the database.
	whileDown func(t *testing.T, rt crashRuntime, id string, db *sqlx.DB)
	// log, when set, checks the restarted process's log.
	log func(t *testing.T, log string)
	// devRuns checks the development runs once the lifecycle is done.
	devRuns func(t *testing.T, runs []crashRun)
	// eventsMeanwhile sends edits of Alfred's status comment during the run and while Alfred
	// is down, as a real forge does, so that they wait in the inbox when the run is recovered.
	eventsMeanwhile bool
}

// statusEdits sends n edits of Alfred's own comment on the issue, each a new delivery.
func statusEdits(e *e2e, n int) {
	e.t.Helper()
	for range n {
		require.Equal(e.t, http.StatusAccepted, e.send("008-issue_comment-edited", func(doc map[string]any) {
			doc["issue"].(map[string]any)["number"] = e.issue.Number
			c := doc["comment"].(map[string]any)
			c["user"].(map[string]any)["login"] = "bot" // bot_user in the configuration
			c["body"] = "status: " + uuid.NewString()
		}))
	}
}

type crashRun struct {
	ID      int64  `db:"id"`
	Attempt int    `db:"attempt"`
	Status  string `db:"status"`
	Outcome string `db:"outcome"`
	Applied bool   `db:"applied"`
}

// TestKillDuringDevelopmentRun kills ` + "`alfred serve`" + ` with SIGKILL while the development
// container runs and starts it again while the container still runs: the restarted process
// reattaches to the container (it is not destroyed nor run again), collects its result through
// the adapter, pushes it, and the lifecycle finishes with no duplicate comment, no lost event and
// no container left behind.
func TestKillDuringDevelopmentRun(t *testing.T) {
	t.Parallel()
	runCrashCase(t, crashCase{
		whileDown: func(t *testing.T, rt crashRuntime, id string, _ *sqlx.DB) {
			running, _ := rt.state(t, id)
			require.True(t, running, "the container must still run when Alfred restarts")
		},
		devRuns: func(t *testing.T, runs []crashRun) {
			require.Len(t, runs, 1, "the development run was reattached, not run again")
			require.Equal(t, "succeeded", runs[0].Status)
			require.Equal(t, "ok (collected after a restart)", runs[0].Outcome)
			require.True(t, runs[0].Applied)
		},
	})
}

// TestShutdownDuringDevelopmentRun stops ` + "`alfred serve`" + ` with SIGTERM while the development
// container runs: the process exits at once without stopping the container and releases its
// leases; the restarted process reattaches to the container (the agent runs once) and the
// lifecycle finishes.
func TestShutdownDuringDevelopmentRun(t *testing.T) {
	t.Parallel()
	runCrashCase(t, crashCase{
		term:            true,
		eventsMeanwhile: true, // an event pass takes the mailbox first and leaves the run to a run worker
		whileDown: func(t *testing.T, rt crashRuntime, id string, db *sqlx.DB) {
			running, _ := rt.state(t, id)
			require.True(t, running, "the container must still run when Alfred restarts")
			var held int
			require.NoError(t, db.Get(&held, `SELECT count(*) FROM mailboxes WHERE lease_owner IS NOT NULL`))
			require.Zero(t, held, "a clean shutdown releases its leases")
		},
		log: func(t *testing.T, log string) {
			require.Contains(t, log, "run left running for the next process")
			require.NotContains(t, log, "held by a live lease at start-up")
		},
		devRuns: func(t *testing.T, runs []crashRun) {
			require.Len(t, runs, 1, "the development run was reattached, not run again")
			require.Equal(t, "succeeded", runs[0].Status)
			require.True(t, runs[0].Applied)
		},
	})
}

// TestKillDuringDevelopmentRunContainerFinishes: the container finishes while Alfred is down,
// and edits of Alfred's status comment arrive during the run and at the restart (pending when
// the run is recovered). On start the run's result is collected (not run again: one
// development run, succeeded), the
// agent's changes are pushed and the lifecycle completes.
func TestKillDuringDevelopmentRunContainerFinishes(t *testing.T) {
	t.Parallel()
	runCrashCase(t, crashCase{
		releaseWhileDown: true,
		eventsMeanwhile:  true, // issue 25: the collected run was discarded and run again
		whileDown: func(t *testing.T, rt crashRuntime, id string, db *sqlx.DB) {
			require.Eventually(t, func() bool {
				running, _ := rt.state(t, id)
				return !running
			}, time.Minute, 100*time.Millisecond, "the container never finished")
			_, exit := rt.state(t, id)
			require.Equal(t, 0, exit, "the development container failed (or was stopped by another process)")
			// The killed process's lease has expired, so the start-up recovery (not a worker's
			// step) claims the mailbox and collects the run.
			require.Eventually(t, func() bool {
				var held int
				require.NoError(t, db.Get(&held, `SELECT count(*) FROM mailboxes WHERE lease_expires_at > $1`, time.Now()))
				return held == 0
			}, time.Minute, 100*time.Millisecond)
		},
		log: func(t *testing.T, log string) {
			require.Contains(t, log, "run recovered after a restart")
			require.NotContains(t, log, "held by a live lease at start-up")
		},
		devRuns: func(t *testing.T, runs []crashRun) {
			require.Len(t, runs, 1, "the finished run was collected, not run again")
			require.Equal(t, "succeeded", runs[0].Status)
			require.Equal(t, "ok (collected after a restart)", runs[0].Outcome)
			require.True(t, runs[0].Applied)
		},
	})
}

// TestKillDuringDevelopmentRunContainerRemoved: the container is removed while Alfred is down.
// On start the run is interrupted with the reason, and the mailbox continues by its normal
// rules: the development runs again (attempt 2) and the lifecycle completes.
func TestKillDuringDevelopmentRunContainerRemoved(t *testing.T) {
	t.Parallel()
	runCrashCase(t, crashCase{
		sleep: "600",
		whileDown: func(t *testing.T, rt crashRuntime, id string, _ *sqlx.DB) {
			rt.remove(t, id)
		},
		devRuns: func(t *testing.T, runs []crashRun) {
			require.Len(t, runs, 2)
			require.Equal(t, "interrupted", runs[0].Status)
			require.Contains(t, runs[0].Outcome, "was removed while Alfred was not running")
			require.Equal(t, "succeeded", runs[1].Status)
			require.Equal(t, 2, runs[1].Attempt)
		},
	})
}

// runCrashCase drives one crash scenario on Docker on each store (e2eStores, one subtest each),
// and on Kubernetes (the test cluster) on PostgreSQL.
func runCrashCase(t *testing.T, c crashCase) {
	for _, store := range e2eStores {
		t.Run("store="+store, func(t *testing.T) {
			t.Parallel()
			runCrashCaseOn(t, store, newDockerCrash(t), c)
		})
	}
	t.Run("runtime=kubernetes", func(t *testing.T) {
		t.Parallel()
		runCrashCaseOn(t, storePostgres, newKubeCrash(t), c)
	})
}

// runCrashCaseOn drives one crash scenario on store and rt: assign, plan, validate; SIGKILL
// during the first development container; c.whileDown; restart; then the lifecycle must reach
// done.
func runCrashCaseOn(t *testing.T, store string, rt crashRuntime, c crashCase) {
	dsn := testDatabaseURL(t, store)
	ctx := context.Background()
	image := scriptImage(t)

	dir := t.TempDir()
	bin := servetest.Binary(t)
	dataDir := filepath.Join(dir, "data")
	runnerConfig := rt.prepare(t, image, dataDir)

	bare := seedBareRepo(t, dir)
	fj := forgetest.NewForgejoServer(t)
	fj.AddRepo("acceptance/sandbox", "main", bare)
	fj.AddUser("alice")
	fj.AddUser("bot")
	fj.SetAccess("acceptance/sandbox", "alice", true)
	fj.AddIssue("acceptance/sandbox", forgetest.SeedIssue{Title: "Export the report as CSV", Body: "Please.",
		Author: "alice", Assignees: []string{"bot"}, Labels: []string{"type::task"}})
	api, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: fj.URL, Token: fj.Token})
	require.NoError(t, err)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	scriptPath := filepath.Join(dir, "script.yaml")
	script := crashHoldScript
	if c.sleep != "" {
		script = fmt.Sprintf(crashScript, c.sleep)
	}
	require.NoError(t, os.WriteFile(scriptPath, []byte(script), 0o644))
	cfgPath := filepath.Join(dir, "alfred.yaml")
	serveConfig{listen: addr, dataDir: dataDir, forgeURL: fj.URL, forgeToken: fj.Token, image: image,
		script: scriptPath, ciWait: "2s", leaseTTL: "3s", runner: runnerConfig}.write(t, cfgPath)

	start := func() *servetest.Process {
		return servetest.Start(t, servetest.Healthz, "serve", bin, cfgPath, filepath.Join(dir, "serve.log"), addr, "ALFRED_DATABASE_URL="+dsn)
	}
	proc := start()

	e := &e2e{t: t, url: "http://" + addr, forgejo: fj, api: api, bare: bare, kind: forge.KindForgejo,
		issue: forge.IssueRef{Forge: "forgejo", Repo: "acceptance/sandbox", Number: 1}}
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", setLabels("type::task")))
	e.waitStatus("status::waiting_validation")
	require.NoError(t, api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated", setLabels(fj.IssueLabels(e.issue)...)))

	// This test's own containers: the instance label is derived from this test's data
	// directory, so a development container of another test (or package) never matches.
	instance := runner.InstanceID(dataDir)
	require.Eventually(t, func() bool { return len(rt.devRunning(t, instance)) == 1 },
		e2eWait, 100*time.Millisecond, "the development container never ran")

	// SIGKILL: no cleanup of any kind runs; the container outlives the process. SIGTERM: the
	// process stops taking work, releases its leases and leaves the container running.
	sig := syscall.SIGKILL
	if c.term {
		sig = syscall.SIGTERM
	}
	if c.eventsMeanwhile {
		statusEdits(e, 3)
	}
	state := proc.Signal(t, sig)
	if c.term {
		require.True(t, state.Success(), "a clean shutdown exits 0")
	}
	list := rt.devRunning(t, instance)
	require.Len(t, list, 1, "the stopped process left its container running")
	db := openTestDatabase(t, dsn, dataDir)
	// release lets the held first development attempt finish (crashHoldScript).
	release := func() {
		var name string
		require.NoError(t, db.Get(&name, `SELECT e.container_name FROM executors e JOIN runs r ON r.id = e.run_id
			WHERE r.phase = 'development' ORDER BY e.id LIMIT 1`))
		out := filepath.Join(dataDir, "runs", name, "out")
		require.DirExists(t, out, "the held run's output directory")
		require.NoError(t, os.WriteFile(filepath.Join(out, crashRelease), nil, 0o644))
	}
	if c.sleep == "" && c.releaseWhileDown {
		release()
	}
	c.whileDown(t, rt, list[0], db)

	proc = start()
	if c.sleep == "" && !c.releaseWhileDown {
		release()
	}
	if c.eventsMeanwhile {
		statusEdits(e, 2) // received before the restarted process's first pass
	}
	e.waitStatus("status::in_ci")
	// No pipeline appears within ci_wait (2s): ready for review.
	e.waitStatus("status::in_review")
	mrs := fj.MergeRequests("acceptance/sandbox")
	require.Len(t, mrs, 1, "one merge request")
	fj.MarkMerged("acceptance/sandbox", mrs[0].Number)
	require.Equal(t, http.StatusAccepted, e.send("022-pull_request-closed", func(doc map[string]any) {
		doc["number"] = mrs[0].Number
		doc["pull_request"].(map[string]any)["number"] = mrs[0].Number
		doc["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = mrs[0].SourceBranch
	}))
	e.waitStatus("status::done")
	e.requireUniqueMarkers()

	// The development runs are as the case says, no executor is left live, and every event
	// was processed.
	if c.log != nil {
		b, err := os.ReadFile(filepath.Join(dir, "serve.log"))
		require.NoError(t, err)
		c.log(t, string(b))
	}
	var runs []crashRun
	require.NoError(t, db.Select(&runs, `SELECT id, attempt, status, outcome, applied FROM runs WHERE phase = 'development' ORDER BY id`))
	c.devRuns(t, runs)
	rt.done(t, dataDir, fj.Token, runs)
	var live int
	require.NoError(t, db.Get(&live, `SELECT count(*) FROM executors WHERE status IN ('starting', 'ready')`))
	require.Zero(t, live, "a container record is still live")
	// The done label is set during the pass that applies the merge; the pass commits its events
	// after its forge calls, so the last event's mark may follow the label by a moment.
	require.Eventually(t, func() bool {
		var pending int
		require.NoError(t, db.Get(&pending, `SELECT count(*) FROM events WHERE processed_at IS NULL`))
		return pending == 0
	}, time.Minute, 50*time.Millisecond, "an event was lost")
}
