package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/agenttest"
	"github.com/alfred-bot/alfred/runner/agent/apimode/apimodetest"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// handOverFinals are the model stand-in's answers to the analyses of
// TestReplicasKubernetesHandOver20: no question, so that each issue goes straight to the plan.
var handOverFinals = map[string]string{
	"analysis.functional": `{"summary": "Understood.", "understanding": "You want the report exported as CSV.", "questions": []}`,
	"analysis.technical":  `{"summary": "Planned.", "plan": "1. Add export.csv with the header row."}`,
}

// handOvers is how many development runs TestReplicasKubernetesHandOver20 hands over at once.
const handOvers = 20

// handOverStall is how long TestReplicasKubernetesHandOver20 waits with nothing moving (no
// run starting or finishing, no issue reaching the awaited status, no Pod running) before it
// calls a wait a hang: several times the longest wait seen on an idle machine for a run's Pod
// (100 s, 40 analysis Pods at once). The wait itself has no bound while the issues move.
const handOverStall = 5 * time.Minute

// TestReplicasKubernetesHandOver20 is issue 25's hand-over, twenty times at once: two replicas
// on one PostgreSQL store and the test cluster (runner.runtime kubernetes, one data directory
// through the state claim). Replica A takes 20 issues through their analysis, in API mode
// against a model stand-in (what is handed over are the development Pods; 40 analysis Pods
// would only load the cluster), and starts their 20 development Pods, which the stand-in CLI
// holds (its hold file in each session directory); replica B starts meanwhile; edits of
// Alfred's status comment arrive on every issue (A up, then A stopping, then B alone); A is
// stopped with SIGTERM while the 20 Pods run, and the Pods are let go. B takes over every
// mailbox: for each of the 20 issues each phase ran exactly once (one run row per phase,
// succeeded and applied; one development Pod per run; B started no run), no comment was
// posted twice, every event was processed, no phase was counted a rerun, and no Pod or Secret
// is left.
func TestReplicasKubernetesHandOver20(t *testing.T) {
	// Beside the other end-to-end tests: its leases (30 s) outlast a heartbeat the load delays,
	// and most of its time is spent waiting on the cluster's Pods.
	t.Parallel()
	kubeconfig, cs := kubetest.Kubeconfig(t)
	ctx := context.Background()
	cli := runtimetest.Client(t)
	dir := t.TempDir()
	bin := servetest.Binary(t)
	image := agenttest.BuildImageOnce(t, ctx, cli)
	kubetest.ImportImage(t, image)
	ns := kubetest.Namespace(t, cs)
	rec := recordKube(t, cs, ns)
	data := filepath.Join(dir, "data")
	claim := kubetest.StateClaim(t, cs, ns, data)
	dsn := testDatabaseURL(t, storePostgres)

	model := apimodetest.NewAnthropic(t, apiModeKey, apiModeModel, apimodetest.Analyst("README.md", handOverFinals))
	keyFile := filepath.Join(dir, "anthropic.key")
	require.NoError(t, os.WriteFile(keyFile, []byte(apiModeKey), 0o600))
	fj := forgetest.NewForgejoServer(t)
	bare := seedBareRepo(t, dir)
	fj.AddRepo("acceptance/sandbox", "main", bare)
	fj.AddUser("alice")
	fj.AddUser("bot")
	fj.SetAccess("acceptance/sandbox", "alice", true)
	api, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: fj.URL, Token: fj.Token})
	require.NoError(t, err)
	issues := make([]*e2e, handOvers)
	for i := range issues {
		n := fj.AddIssue("acceptance/sandbox", forgetest.SeedIssue{Title: fmt.Sprintf("Export report %d as CSV", i+1),
			Body: "Please.", Author: "alice", Assignees: []string{"bot"}, Labels: []string{"type::task"}})
		issues[i] = &e2e{t: t, forgejo: fj, api: api, bare: bare, kind: forge.KindForgejo,
			issue: forge.IssueRef{Forge: "forgejo", Repo: "acceptance/sandbox", Number: n}}
	}
	point := func(r *replica) {
		for _, e := range issues {
			e.url = "http://" + r.Addr
		}
	}
	numbered := func(e *e2e, edit func(map[string]any)) func(map[string]any) {
		return func(doc map[string]any) {
			edit(doc)
			doc["issue"].(map[string]any)["number"] = e.issue.Number
		}
	}

	start := func(name string) *replica {
		addr := freeAddr(t)
		cfg := filepath.Join(dir, name+".yaml")
		serveConfig{listen: addr, dataDir: data, forgeURL: fj.URL, forgeToken: fj.Token, image: image,
			ciWait: "2s", workers: 4, runs: handOvers, leaseTTL: "30s",
			analyst: fmt.Sprintf("{name: analyst, adapter: anthropic-api, model: %s, api_key_file: %s, base_url: %s}",
				apiModeModel, keyFile, model.BaseURL()),
			leaseWhy: "SIGTERM releases A's leases: a long TTL costs the hand-over nothing, a short one is lost to a heartbeat a loaded machine starves (the run is run again)",
			runner: fmt.Sprintf(`runner:
  memory_bytes: 134217728
  runtime: kubernetes
  egress: {mode: open}  # not this test's subject: runner/redteam_egress_kubernetes_test.go
  kubernetes:
    kubeconfig: %s
    namespace: %s
    state_claim: %s
    pull_policy: Never
    # The 20 held Pods reserve one of the node's two cores, the other is for the tests beside;
    # each run may use what is idle up to runner.cpus, its limit (a whole core by default).
    requests: {cpu: 50m, memory: 64Mi}`, kubeconfig, ns, claim)}.write(t, cfg)
		return servetest.Start(t, servetest.Healthz, name, bin, cfg, filepath.Join(dir, name+".log"), addr, "ALFRED_DATABASE_URL="+dsn)
	}

	began := time.Now()
	a := start("replica-a")
	point(a)
	db := openTestDatabase(t, dsn, data)
	for _, e := range issues {
		require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", numbered(e, setLabels("type::task"))))
	}
	// 40 analyses in API mode, four workers at once: as long as they take, while runs keep
	// finishing.
	waitStatusAll(t, db, issues, "status::waiting_validation", handOverStall)
	holds := make([]string, len(issues))
	for i, e := range issues {
		var mb int64
		require.NoError(t, db.Get(&mb, `SELECT id FROM mailboxes WHERE number = $1`, e.issue.Number))
		// The development run's session directory: no CLI ran before it; the runner takes the
		// directory over (its owner) when it starts the run.
		holds[i] = filepath.Join(data, "sessions", fmt.Sprint(mb), "claude", agenttest.StandinHoldFile)
		require.NoError(t, os.MkdirAll(filepath.Dir(holds[i]), 0o755))
		require.NoError(t, os.WriteFile(holds[i], nil, 0o644))
	}
	for _, e := range issues {
		require.NoError(t, api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
		require.Equal(t, http.StatusAccepted, e.send("003-issue_label-label_updated", numbered(e, setLabels(fj.IssueLabels(e.issue)...))))
	}
	devRunning := func() int {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: runner.LabelManaged + "=true," +
			runner.LabelPhase + "=development"})
		require.NoError(t, err)
		n := 0
		for i := range list.Items {
			if st := kubernetes.RunContainerStatus(&list.Items[i]); st != nil && st.State.Running != nil {
				n++
			}
		}
		return n
	}
	waitProgress(t, handOverStall, fmt.Sprintf("the %d development Pods running at once", handOvers), func() (int, string) {
		if n := devRunning(); n < handOvers {
			return n, fmt.Sprintf("%d running", n)
		}
		return handOvers, ""
	})
	t.Logf("%d development Pods held after %s", handOvers, time.Since(began).Round(time.Second))

	b := start("replica-b")
	for _, e := range issues {
		statusEdits(e, 2) // to A, while its runs go on
	}
	point(b)
	a.Stop(t) // SIGTERM: A leaves its Pods running and releases its leases
	require.Contains(t, a.Text(t), "run left running for the next process")
	for _, e := range issues {
		statusEdits(e, 1) // to B, pending when it takes the mailbox over
	}
	require.Equal(t, handOvers, devRunning(), "the stopped replica left its Pods running")
	for _, h := range holds {
		require.NoError(t, os.Remove(h))
	}
	waitStatusAll(t, db, issues, "status::in_review", handOverStall) // in_ci, then no pipeline within ci_wait
	for _, e := range issues {
		e.requireUniqueMarkers()
	}
	t.Logf("%d hand-overs done after %s", handOvers, time.Since(began).Round(time.Second))

	type runRow struct {
		Number  int64  `db:"number"`
		ID      int64  `db:"id"`
		Key     string `db:"key"`
		Status  string `db:"status"`
		Applied bool   `db:"applied"`
	}
	var rows []runRow
	require.NoError(t, db.Select(&rows, `SELECT m.number, r.id, r.phase || CASE WHEN r.step = '' THEN '' ELSE '.' || r.step END AS key,
		r.status, r.applied FROM runs r JOIN mailboxes m ON m.id = r.mailbox_id ORDER BY m.number, r.id`))
	per := map[int64][]string{}
	devRun := map[int64]int64{}
	for _, r := range rows {
		require.Equal(t, "succeeded", r.Status, "issue #%d run %s", r.Number, r.Key)
		require.True(t, r.Applied, "issue #%d run %s", r.Number, r.Key)
		per[r.Number] = append(per[r.Number], r.Key)
		if r.Key == "development" {
			devRun[r.Number] = r.ID
		}
	}
	require.Len(t, per, handOvers)
	for _, e := range issues {
		require.Equal(t, []string{"analysis.functional", "analysis.technical", "development"}, per[e.issue.Number],
			"issue #%d: each phase ran once", e.issue.Number)
		pods := rec.Pods(map[string]string{runner.LabelManaged: "true", runner.LabelPhase: "development",
			runner.LabelRun: fmt.Sprint(devRun[e.issue.Number])})
		require.Len(t, pods, 1, "issue #%d: one development Pod", e.issue.Number)
		res := pods[0].Spec.Containers[0].Resources
		require.Equal(t, "50m", res.Requests.Cpu().String(), "runner.kubernetes.requests")
		require.Equal(t, "1", res.Limits.Cpu().String(), "runner.cpus, the default")
	}
	for _, k := range ran(t, b) {
		require.NotEqual(t, "development", k, "B started a development run")
	}
	for _, r := range []*replica{a, b} {
		require.NotContains(t, r.Text(t), "a phase runs again for one decision", "replica %s", r.Name)
	}
	require.Eventually(t, func() bool {
		var pending int
		require.NoError(t, db.Get(&pending, `SELECT count(*) FROM events WHERE processed_at IS NULL`))
		return pending == 0
	}, time.Minute, 100*time.Millisecond, "an event was lost")
	require.Eventually(t, func() bool {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		s, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: runner.LabelManaged + "=true"})
		require.NoError(t, err)
		return len(list.Items) == 0 && len(s.Items) == 0
	}, time.Minute, 200*time.Millisecond, "a run's Pod or Secret was left behind")
}

// waitStatusAll waits until every issue of es carries the status label want, for as long as
// they move: it fails once stall passes with no run in db starting or finishing and no issue
// newly reaching want, naming the issues still short of it.
func waitStatusAll(t *testing.T, db *sqlx.DB, es []*e2e, want string, stall time.Duration) {
	t.Helper()
	short := func() []int64 {
		var n []int64
		for _, e := range es {
			if !slices.Contains(e.forgejo.IssueLabels(e.issue), want) {
				n = append(n, e.issue.Number)
			}
		}
		return n
	}
	waitProgress(t, stall, "status "+want+" on every issue", func() (int, string) {
		var runs struct {
			Started  int `db:"started"`
			Finished int `db:"finished"`
		}
		require.NoError(t, db.Get(&runs, `SELECT count(*) AS started, count(finished_at) AS finished FROM runs`))
		left := short()
		if len(left) == 0 {
			return 0, ""
		}
		return runs.Started + runs.Finished + len(es) - len(left),
			fmt.Sprintf("%d runs started, %d finished, issues %v without it", runs.Started, runs.Finished, left)
	})
}

// waitProgress polls progress every 200 ms until it reports nothing pending. progress counts
// what has moved so far (it never goes down while things move) and says what is still
// awaited, "" once nothing is; the wait fails once stall passes with the count unchanged, as
// a hang, however long it has waited in all.
func waitProgress(t *testing.T, stall time.Duration, what string, progress func() (count int, pending string)) {
	t.Helper()
	last, since := -1, time.Now()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		n, pending := progress()
		switch {
		case pending == "":
			return
		case n != last:
			last, since = n, time.Now()
		case time.Since(since) > stall:
			require.FailNowf(t, "no progress", "%s: nothing moved for %s: %s", what, stall, pending)
		}
	}
}

// waitStatusWithin is e2e.waitStatus with a time limit of the caller's, for runs that share
// the machine's and the test cluster's cores with many others (twenty issues at once, the
// matrix's cells in parallel): a limit against a hang, not a measure of speed.
func waitStatusWithin(e *e2e, want string, within time.Duration) {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return slices.Contains(e.forgejo.IssueLabels(e.issue), want) },
		within, 100*time.Millisecond, "issue #%d: status %s never came; labels %v", e.issue.Number, want, e.forgejo.IssueLabels(e.issue))
}
