package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/runner/agent/agenttest"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// replicaSet is several `alfred serve` processes (replicas) of one test on one PostgreSQL
// schema, one Forgejo stand-in and one bare repository, with the stand-in claude CLI in every
// phase. Each replica has its own listen address and log file; the data directory and the
// runner section are the replica's.
type replicaSet struct {
	*e2e
	t     *testing.T
	dir   string
	bin   string
	dsn   string
	image string
	fj    *forgetest.ForgejoServer
	db    *sqlx.DB
}

// replica is one running `alfred serve` of a replicaSet.
type replica = servetest.Process

// newReplicaSet builds the alfred binary and the stand-in claude image and seeds the forge:
// issue #1 of acceptance/sandbox by alice, a task, the bot assigned.
func newReplicaSet(t *testing.T) *replicaSet {
	t.Helper()
	dsn := testDatabaseURL(t, storePostgres)
	cli := runtimetest.Client(t)
	dir := t.TempDir()
	rs := &replicaSet{t: t, dir: dir, dsn: dsn, bin: servetest.Binary(t),
		image: agenttest.BuildImageOnce(t, context.Background(), cli), fj: forgetest.NewForgejoServer(t)}
	bare := seedBareRepo(t, dir)
	rs.fj.AddRepo("acceptance/sandbox", "main", bare)
	rs.fj.AddUser("alice")
	rs.fj.AddUser("bot")
	rs.fj.SetAccess("acceptance/sandbox", "alice", true)
	rs.fj.AddIssue("acceptance/sandbox", forgetest.SeedIssue{Title: "Export the report as CSV", Body: "Please.",
		Author: "alice", Assignees: []string{"bot"}, Labels: []string{"type::task"}})
	api, err := forgejo.NewClient(forgejo.ClientConfig{BaseURL: rs.fj.URL, Token: rs.fj.Token})
	require.NoError(t, err)
	rs.e2e = &e2e{t: t, forgejo: rs.fj, api: api, bare: bare, kind: forge.KindForgejo,
		issue: forge.IssueRef{Forge: "forgejo", Repo: "acceptance/sandbox", Number: 1}}
	return rs
}

// start starts replica name on dataDir with runnerYAML (the runner section, "" for the
// defaults), waits until it answers /healthz (after its start-up recovery and reap) and
// points the deliveries at it. It is killed when the test ends.
func (rs *replicaSet) start(name, dataDir, runnerYAML string) *replica {
	t := rs.t
	t.Helper()
	addr := freeAddr(t)
	cfgPath := filepath.Join(rs.dir, name+".yaml")
	serveConfig{listen: addr, dataDir: dataDir, forgeURL: rs.fj.URL, forgeToken: rs.fj.Token, image: rs.image,
		ciWait: "1h", leaseTTL: "3s", runner: runnerYAML}.write(t, cfgPath)
	r := servetest.Start(t, servetest.Healthz, name, rs.bin, cfgPath, filepath.Join(rs.dir, name+".log"), addr, "ALFRED_DATABASE_URL="+rs.dsn)
	rs.url = "http://" + r.Addr
	if rs.db == nil {
		rs.db = openTestDatabase(t, rs.dsn, dataDir)
		t.Cleanup(func() {
			if !t.Failed() {
				return
			}
			for _, q := range []string{`SELECT row_to_json(m)::text FROM mailboxes m`, `SELECT row_to_json(r)::text FROM runs r ORDER BY id`,
				`SELECT row_to_json(e)::text FROM events e ORDER BY id`} {
				var rows []string
				_ = rs.db.Select(&rows, q)
				t.Logf("%s:\n%s", q, strings.Join(rows, "\n"))
			}
		})
	}
	return r
}

var runStarted = regexp.MustCompile(`msg="run started" .*?phase=(\S+) step=(\S+)`)

// ran lists the run keys replica r started, in order ("analysis.functional", "development").
func ran(t *testing.T, r *replica) []string {
	t.Helper()
	var keys []string
	for _, m := range runStarted.FindAllStringSubmatch(r.Text(t), -1) {
		keys = append(keys, strings.TrimSuffix(m[1]+"."+strings.Trim(m[2], `"`), "."))
	}
	return keys
}

// toValidation assigns the bot (the task is analysed: functional then technical) and waits
// for the plan's validation.
func (rs *replicaSet) toValidation() {
	require.Equal(rs.t, http.StatusAccepted, rs.send("002-issue_assign-assigned", setLabels("type::task")))
	rs.waitStatus("status::waiting_validation")
}

// validate adds ai::validate_plan: the development runs.
func (rs *replicaSet) validate() {
	require.NoError(rs.t, rs.api.SetLabels(context.Background(), rs.issue, []string{"ai::validate_plan"}, nil))
	require.Equal(rs.t, http.StatusAccepted, rs.send("003-issue_label-label_updated", setLabels(rs.fj.IssueLabels(rs.issue)...)))
}

// sessionRow is one llm_sessions row with its run's key.
type sessionRow struct {
	Key       string `db:"key"`
	NativeID  string `db:"native_id"`
	Resumed   bool   `db:"resumed"`
	Fallback  string `db:"fallback_reason"`
	StateHost string `db:"state_host"`
	Reported  int64  `db:"reported_in"`
	Succeeded bool   `db:"succeeded"`
}

// sessions lists the issue's session rows, oldest first.
func (rs *replicaSet) sessions() []sessionRow {
	var rows []sessionRow
	require.NoError(rs.t, rs.db.Select(&rows, `SELECT r.phase || CASE WHEN r.step = '' THEN '' ELSE '.' || r.step END AS key,
		s.native_id, s.resumed, s.fallback_reason, s.state_host, s.reported_in, s.succeeded
		FROM llm_sessions s JOIN runs r ON r.id = s.run_id ORDER BY s.id`))
	return rows
}

// requireEventsOnce checks that every event was processed and every run key ran once.
func (rs *replicaSet) requireEventsOnce(keys ...string) {
	t := rs.t
	require.Eventually(t, func() bool {
		var pending int
		require.NoError(t, rs.db.Get(&pending, `SELECT count(*) FROM events WHERE processed_at IS NULL`))
		return pending == 0
	}, time.Minute, 50*time.Millisecond, "an event was lost")
	var got []string
	require.NoError(t, rs.db.Select(&got, `SELECT phase || CASE WHEN step = '' THEN '' ELSE '.' || step END FROM runs ORDER BY id`))
	require.Equal(t, keys, got, "each phase ran once, on one replica")
	rs.requireUniqueMarkers()
}

// TestReplicasDockerSessionElsewhere: Docker on several hosts. Two replicas on one PostgreSQL,
// each with its own data directory (and so its own session state). Replica A runs the
// analysis and stops; replica B runs the development. B cannot resume A's session: it starts a
// fresh one, and says so — the session record's reason is state_elsewhere, the earlier records
// name A's data directory, B's its own, and B's log says whose the state is.
func TestReplicasDockerSessionElsewhere(t *testing.T) {
	t.Parallel()
	rs := newReplicaSet(t)
	dataA, dataB := filepath.Join(rs.dir, "data-a"), filepath.Join(rs.dir, "data-b")
	a := rs.start("replica-a", dataA, "")
	rs.toValidation()
	a.Stop(t)
	b := rs.start("replica-b", dataB, "")
	rs.validate()
	rs.waitStatus("status::in_ci")

	hostA, err := os.ReadFile(filepath.Join(dataA, "state-host"))
	require.NoError(t, err)
	hostB, err := os.ReadFile(filepath.Join(dataB, "state-host"))
	require.NoError(t, err)
	idA, idB := strings.TrimSpace(string(hostA)), strings.TrimSpace(string(hostB))
	require.NotEqual(t, idA, idB, "two data directories, two ids")

	require.Equal(t, []string{"analysis.functional", "analysis.technical"}, ran(t, a))
	require.Equal(t, []string{"development"}, ran(t, b))
	rows := rs.sessions()
	require.Len(t, rows, 3)
	require.Equal(t, sessionRow{Key: "analysis.functional", NativeID: rows[0].NativeID, Fallback: "no_prior_session",
		StateHost: idA, Reported: rows[0].Reported, Succeeded: true}, rows[0])
	require.Equal(t, sessionRow{Key: "analysis.technical", NativeID: rows[0].NativeID, Resumed: true,
		StateHost: idA, Reported: rows[1].Reported, Succeeded: true}, rows[1])
	require.Equal(t, sessionRow{Key: "development", NativeID: rows[2].NativeID, Fallback: "state_elsewhere",
		StateHost: idB, Reported: rows[2].Reported, Succeeded: true}, rows[2])
	require.NotEqual(t, rows[0].NativeID, rows[2].NativeID, "a fresh session on B")
	require.Contains(t, b.Text(t), fmt.Sprintf("session state of mailbox 1 is on replica %s, not here (%s)", idA, idB))
	rs.requireEventsOnce("analysis.functional", "analysis.technical", "development")
}

// TestReplicasKubernetesOneSession: two replicas on one PostgreSQL and the test cluster
// (runner.runtime: kubernetes), sharing one data directory through the state claim. Replica A
// runs the analysis and starts the development, whose Pod the stand-in holds; replica B starts
// meanwhile: its start-up recovery leaves A's mailbox to A's lease and its reap removes none of
// A's run (the Pod, the worktree, the run directory, the session state). A then finishes the
// development and stops; B runs the CI fix. One agent session throughout: every run after the
// first resumes the same native id, the CLI of the CI fix on B answered with the three earlier
// turns of A in its history (its session file, its cumulative usage), each phase ran once,
// every event was processed and no comment was posted twice; nothing is left in the cluster.
func TestReplicasKubernetesOneSession(t *testing.T) {
	t.Parallel()
	kubeconfig, cs := kubetest.Kubeconfig(t)
	rs := newReplicaSet(t)
	kubetest.ImportImage(t, rs.image)
	ns := kubetest.Namespace(t, cs)
	data := filepath.Join(rs.dir, "data")
	claim := kubetest.StateClaim(t, cs, ns, data)
	runnerYAML := fmt.Sprintf(`runner:
  runtime: kubernetes
  egress: {mode: open}  # not this test's subject: runner/redteam_egress_kubernetes_test.go
  # requests: the limits (a core, 2 GiB) reserved would leave the tests beside little room on the node
  kubernetes: {kubeconfig: %s, namespace: %s, state_claim: %s, pull_policy: Never, requests: {cpu: 50m, memory: 64Mi}}
`, kubeconfig, ns, claim)
	ctx := context.Background()
	pods := func(phase string) []corev1.Pod {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "alfred.managed=true,alfred.phase=" + phase})
		require.NoError(t, err)
		return list.Items
	}

	a := rs.start("replica-a", data, runnerYAML)
	rs.toValidation()
	var mb int64
	require.NoError(t, rs.db.Get(&mb, `SELECT id FROM mailboxes WHERE number = 1`))
	sessionDir := filepath.Join(data, "sessions", fmt.Sprint(mb), "claude")
	hold := filepath.Join(sessionDir, agenttest.StandinHoldFile)
	require.NoError(t, os.WriteFile(hold, nil, 0o644))
	rs.validate()
	var dev corev1.Pod
	require.Eventually(t, func() bool {
		list := pods("development")
		if len(list) != 1 || list[0].Status.Phase != corev1.PodRunning {
			return false
		}
		dev = list[0]
		return true
	}, 2*time.Minute, 100*time.Millisecond, "the development Pod never ran")

	// B starts while A's development Pod runs; /healthz answers after its recovery and reap.
	b := rs.start("replica-b", data, runnerYAML)
	require.Contains(t, b.Text(t), "held by a live lease at start-up", "B's recovery left A's run to A")
	p, err := cs.CoreV1().Pods(ns).Get(ctx, dev.Name, metav1.GetOptions{})
	require.NoError(t, err, "B's start-up removed A's Pod")
	require.Equal(t, corev1.PodRunning, p.Status.Phase)
	require.Nil(t, p.DeletionTimestamp)
	for _, d := range []string{sessionDir, filepath.Join(data, "worktrees", fmt.Sprintf("alfred-mbx%d-worktree", mb)),
		filepath.Join(data, "runs", dev.Name)} {
		require.DirExists(t, d, "B's start-up removed a directory of A's live run")
	}

	require.NoError(t, os.Remove(hold))
	rs.waitStatus("status::in_ci")
	a.Stop(t)
	rs.url = "http://" + b.Addr

	mr := rs.fj.MergeRequests(rs.issue.Repo)[0]
	head := func() string {
		out, err := exec.Command("git", "-C", rs.bare, "rev-parse", mr.SourceBranch).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	first := head()
	rs.fj.SetCI(rs.issue.Repo, first, forgetest.CIJob{Name: "ci/test", State: forge.CIFailed, Log: "FAIL"})
	require.Eventually(t, func() bool { return head() != first }, 2*time.Minute, 100*time.Millisecond, "no ci_fix push")
	rs.fj.SetCI(rs.issue.Repo, head(), forgetest.CIJob{Name: "ci/test", State: forge.CISuccess})
	rs.waitStatus("status::in_review")
	// The session's history as the CLI of the CI fix on B read and extended it: A's three
	// turns, then B's.
	native := rs.sessions()[0].NativeID
	history, err := os.ReadFile(filepath.Join(sessionDir, native+".jsonl"))
	require.NoError(t, err)
	at := -1
	for _, key := range []string{"analysis.functional", "analysis.technical", "development", "ci_fix"} {
		i := strings.Index(string(history), "## Your task ("+key+")")
		require.Greater(t, i, at, "turn %s in the session's history, in order", key)
		at = i
	}
	rs.fj.MarkMerged(rs.issue.Repo, mr.Number)
	require.Equal(t, http.StatusAccepted, rs.send("022-pull_request-closed", func(doc map[string]any) {
		doc["number"] = mr.Number
		doc["pull_request"].(map[string]any)["number"] = mr.Number
		doc["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = mr.SourceBranch
	}))
	rs.waitStatus("status::done")

	require.Equal(t, []string{"analysis.functional", "analysis.technical", "development"}, ran(t, a))
	require.Equal(t, []string{"ci_fix"}, ran(t, b))
	host, err := os.ReadFile(filepath.Join(data, "state-host"))
	require.NoError(t, err)
	rows := rs.sessions()
	require.Len(t, rows, 4)
	for i, r := range rows {
		require.Equal(t, rows[0].NativeID, r.NativeID, "one session")
		require.Equal(t, i > 0, r.Resumed, "run %s resumed", r.Key)
		require.True(t, r.Succeeded)
		require.Equal(t, strings.TrimSpace(string(host)), r.StateHost, "one data directory")
		// The stand-in reports usage summed over the session's turns, as Claude Code does.
		require.EqualValues(t, 120*(i+1), r.Reported, "run %s: the CLI counted %d turns", r.Key, i+1)
	}
	require.Equal(t, "ci_fix", rows[3].Key)
	rs.requireEventsOnce("analysis.functional", "analysis.technical", "development", "ci_fix")
	require.Eventually(t, func() bool {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "alfred.managed=true"})
		require.NoError(t, err)
		return len(list.Items) == 0
	}, time.Minute, 200*time.Millisecond, "a run's Pod was left behind")
	require.NoDirExists(t, sessionDir, "the session state goes with the mailbox")
}
