package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/internal/base/pgtest"
	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// throughputMailboxes is how many issues each round of BenchmarkMailboxThroughputKubernetes
// assigns at once.
const throughputMailboxes = 12

// throughputScript is the analysis of the throughput rounds: no question, so each mailbox runs
// its two analysis phases and waits for the plan's validation. %s is a step's extra field
// (a sleep, or nothing).
const throughputScript = `
analysis.functional:
  summary: Understood.
  understanding: You want the report exported as a CSV file.
  expected_behaviour: An Export button downloads report.csv.
  acceptance_criteria: [the file opens in a spreadsheet]
  out_of_scope: [PDF export]
  %[1]s
analysis.technical:
  summary: Planned.
  plan: "1. Add export.csv."
  %[1]s
`

// BenchmarkMailboxThroughputKubernetes measures how many mailboxes Alfred carries through
// their analysis per second with one `alfred serve` replica and with three, the replicas being
// real subprocesses sharing one PostgreSQL schema (internal/base/pgtest) and one data_dir, which is
// the state claim of the namespace (kubetest.StateClaim), and running every phase as a Pod on
// the test cluster (runner.runtime: kubernetes). Each round starts its replicas (each with the
// defaults: 2 event workers, 2 runs at once), waits until each answers /healthz, then opens
// throughputMailboxes issues assigned to the bot with type::task and delivers their assignment
// webhooks round-robin to the replicas, and is timed until every issue carries
// status::waiting_validation: two analysis phases (two Pods) per mailbox. The replicas are then
// stopped with SIGTERM. Every iteration runs a round with one replica, then one with three.
//
// The Pods ask for 0.1 CPU and 256 MiB (runner.cpus, runner.memory_bytes), so that the
// scheduler fits every run at once on the node's two cores: with the default runner.cpus of 1,
// requests equal to the limits let two Pods run on the node at a time, whatever the replicas.
//
// Sub-benchmarks: phase=short, phases that answer at once (the Pods' start and end, Alfred's
// and the cluster's work, are all the time: CPU-bound on this machine); phase=wait2s, phases
// that wait 2 s first, as an agent waiting on its model does (the runs at once are the bound).
//
// Reported (medians over the iterations): mbx/s-1 and mbx/s-3 (mailboxes completed per
// second) and ratio (3 replicas ÷ 1); in the 1-replica rounds, slot-ms/phase (how long a phase
// holds one of the replica's 2 run slots: 2 × the round's time ÷ its phases) and pod-ms/phase
// (the median Pod's time in the cluster, from the watch of the namespace: created → deleted,
// i.e. scheduling, the container's start and run, the kubelet's report of its end, and
// Alfred's wait, logs and delete), so that slot − pod is Alfred's own part (worktree, rows,
// Secret, result); per phase in the 3-replica rounds, the CPU used by the
// replicas (alfred-cpu-ms/phase), by the cluster's long-lived processes (etcd, kube-apiserver,
// the controller manager, the scheduler, the kubelet, the cluster's containerd and its
// shims: kube-cpu-ms/phase) and by PostgreSQL (pg-cpu-ms/phase); machine-busy-3, the share
// of both cores busy during the 3-replica rounds (other processes on the machine included);
// and phase-reruns, the phases started again for a decision already run over every round and
// replica (alfred_phase_reruns_total; 0 is the exactly-once promise).
func BenchmarkMailboxThroughputKubernetes(b *testing.B) {
	for _, c := range []struct{ name, extra string }{{"short", ""}, {"wait2s", "sleep_seconds: 2"}} {
		b.Run("phase="+c.name, func(b *testing.B) {
			env := newThroughputEnv(b, fmt.Sprintf(throughputScript, c.extra))
			var one, three, busy, alfredCPU, kubeCPU, pgCPU, slot, pod []float64
			reruns := 0
			for b.Loop() {
				r1 := env.round(b, 1)
				r3 := env.round(b, 3)
				one, three = append(one, r1.rate), append(three, r3.rate)
				phases := float64(2 * throughputMailboxes)
				alfredCPU = append(alfredCPU, r3.cpu.alfred/phases)
				kubeCPU = append(kubeCPU, r3.cpu.kube/phases)
				pgCPU = append(pgCPU, r3.cpu.pg/phases)
				busy = append(busy, r3.cpu.busy)
				slot = append(slot, 2*float64(r1.took.Milliseconds())/phases)
				pod = append(pod, medianMS(r1.pods))
				reruns += r1.reruns + r3.reruns
				b.Logf("round: 1 replica %.3f mbx/s (%s; a phase holds a slot %.0f ms, its Pod lives %.0f ms), 3 replicas %.3f mbx/s (%s); 3 replicas' CPU per phase: alfred %.0f ms, kube %.0f ms, pg %.0f ms; machine busy %.0f %%, runs per replica %v",
					r1.rate, r1.took.Round(time.Millisecond), slot[len(slot)-1], pod[len(pod)-1], r3.rate, r3.took.Round(time.Millisecond),
					r3.cpu.alfred/phases, r3.cpu.kube/phases, r3.cpu.pg/phases, 100*r3.cpu.busy, r3.runs)
			}
			b.ReportMetric(median(one), "mbx/s-1")
			b.ReportMetric(median(three), "mbx/s-3")
			b.ReportMetric(median(three)/median(one), "ratio")
			b.ReportMetric(median(slot), "slot-ms/phase")
			b.ReportMetric(median(pod), "pod-ms/phase")
			b.ReportMetric(median(alfredCPU), "alfred-cpu-ms/phase")
			b.ReportMetric(median(kubeCPU), "kube-cpu-ms/phase")
			b.ReportMetric(median(pgCPU), "pg-cpu-ms/phase")
			b.ReportMetric(median(busy), "machine-busy-3")
			// Each is one increment of alfred_phase_reruns_total: 0 is the exactly-once promise.
			b.ReportMetric(float64(reruns), "phase-reruns")
		})
	}
}

// median is the median of xs (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// throughputEnv is what the rounds share: the binary, the configuration, the database, the
// data directory and its claim, and the Forgejo stand-in.
type throughputEnv struct {
	bin, dir, cfgPath, dsn string
	fj                     *forgetest.ForgejoServer
	pods                   *podClock
	rounds                 int
}

func newThroughputEnv(b *testing.B, script string) *throughputEnv {
	b.Helper()
	k := newBenchCluster(b)
	agents, image := scriptAgents(b, script)
	kubetest.ImportImage(b, image)
	_, dsn := pgtest.New(b)
	dir := b.TempDir()
	data := filepath.Join(dir, "data")
	claim := kubetest.StateClaim(b, k.cs, k.ns, data)
	bare := seedBareRepo(b, dir)
	fj := forgetest.NewForgejoServer(b)
	fj.AddRepo("acceptance/sandbox", "main", bare)
	fj.AddUser("alice")
	fj.AddUser("bot")
	fj.SetAccess("acceptance/sandbox", "alice", true)
	cfgPath := filepath.Join(dir, "alfred.yaml")
	require.NoError(b, os.WriteFile(cfgPath, []byte(fmt.Sprintf(`
data_dir: %s
forges:
  - {name: forgejo, kind: forgejo, base_url: %s, token: %s, webhook_secret: %s, bot_user: bot}
%s
lifecycle: {ci_wait: 1h, ci_poll: 300ms}
workers: {count: 2, runs: 2, lease_ttl: 10s, poll_interval: 100ms, reconcile_interval: 1h}
runner:
  cpus: 0.1
  memory_bytes: 268435456
  runtime: kubernetes
  egress: {mode: open}  # not this test's subject: runner/redteam_egress_kubernetes_test.go
  kubernetes: {kubeconfig: %s, namespace: %s, state_claim: %s, pull_policy: Never}
`, data, fj.URL, fj.Token, liveSecret, agents, k.kubeconfig, k.ns, claim)), 0o600))
	return &throughputEnv{bin: servetest.Binary(b), dir: dir, cfgPath: cfgPath, dsn: dsn, fj: fj, pods: k.pods}
}

// roundResult is one round's rate (mailboxes per second), time, CPU, runs per replica and the
// lifetimes of its Pods.
type roundResult struct {
	rate float64
	took time.Duration
	cpu  cpuUse
	runs []int
	pods []time.Duration
	// reruns is the phases started again for a decision already run, over the replicas
	// (alfred_phase_reruns_total, read from each replica's log line that goes with it).
	reruns int
}

// round starts n replicas, assigns throughputMailboxes new issues and waits until each waits
// for its plan's validation; it stops the replicas before returning.
func (e *throughputEnv) round(b *testing.B, n int) roundResult {
	b.Helper()
	e.rounds++
	var reps []*benchReplica
	for i := range n {
		reps = append(reps, e.startReplica(b, fmt.Sprintf("r%d-%d", e.rounds, i)))
	}
	defer func() {
		for _, r := range reps {
			r.Stop(b)
		}
	}()
	var pids []int
	for _, r := range reps {
		pids = append(pids, r.Cmd.Process.Pid)
	}
	api := &e2e{t: quietTB{b}, forgejo: e.fj, kind: forge.KindForgejo}
	var refs []forge.IssueRef
	for range throughputMailboxes {
		number := e.fj.AddIssue("acceptance/sandbox", forgetest.SeedIssue{Title: "Export the report as CSV",
			Body: "The monthly report should be downloadable.", Author: "alice", Assignees: []string{"bot"},
			Labels: []string{"type::task"}})
		refs = append(refs, forge.IssueRef{Forge: "forgejo", Repo: "acceptance/sandbox", Number: number})
	}
	before := sampleCPU(b, pids)
	start := time.Now()
	for i, ref := range refs {
		api.url = reps[i%n].URL
		require.Equal(b, http.StatusAccepted, api.send("002-issue_assign-assigned", func(doc map[string]any) {
			setLabels("type::task")(doc)
			doc["number"] = ref.Number
			issue := doc["issue"].(map[string]any)
			issue["number"], issue["id"] = ref.Number, ref.Number
		}))
	}
	left := refs
	require.Eventually(b, func() bool {
		left = slices.DeleteFunc(left, func(ref forge.IssueRef) bool {
			return contains(e.fj.IssueLabels(ref), "status::waiting_validation")
		})
		return len(left) == 0
	}, 10*time.Minute, 20*time.Millisecond, "issues never analysed: %v", left)
	took := time.Since(start)
	cpu := sampleCPU(b, pids).since(before)
	var runs []int
	reruns := 0
	for _, r := range reps {
		runs = append(runs, r.Count(b, `msg="run started"`))
		reruns += r.Count(b, `msg="a phase runs again for one decision`)
	}
	// Every Pod of the round is deleted before its run finishes, so before the issue moves on.
	pods := e.pods.lifetimes(start)
	require.Len(b, pods, 2*throughputMailboxes, "one Pod a phase")
	return roundResult{rate: float64(throughputMailboxes) / took.Seconds(), took: took, cpu: cpu, runs: runs, pods: pods, reruns: reruns}
}

// quietTB is a testing.TB whose Logf prints nothing: the deliveries of a round are not logged
// one by one.
type quietTB struct{ testing.TB }

func (quietTB) Logf(string, ...any) {}

// benchReplica is one `alfred serve` subprocess of the throughput benchmark.
type benchReplica = servetest.Process

// startReplica starts `alfred serve` on a free port with the environment's configuration and
// waits until it answers /healthz.
func (e *throughputEnv) startReplica(b *testing.B, name string) *benchReplica {
	b.Helper()
	addr := freeAddr(b)
	return servetest.Start(b, servetest.Healthz, name, e.bin, e.cfgPath, filepath.Join(e.dir, name+".log"), addr,
		"ALFRED_DATABASE_URL="+e.dsn, "ALFRED_LISTEN="+addr)
}

// cpuSample is CPU time in clock ticks (/proc, USER_HZ = 100): per process of interest, and
// the machine's busy and total ticks.
type cpuSample struct {
	alfred, kube, pg map[int]int64
	busy, total      int64
}

// cpuUse is the CPU used between two samples: milliseconds of CPU per group, and the
// machine's busy share.
type cpuUse struct{ alfred, kube, pg, busy float64 }

// sampleCPU reads the CPU time of the replicas (pids), of the test cluster's long-lived
// processes and its containerd shims, and of PostgreSQL, from /proc.
func sampleCPU(b *testing.B, pids []int) cpuSample {
	b.Helper()
	s := cpuSample{alfred: map[int]int64{}, kube: map[int]int64{}, pg: map[int]int64{}}
	for _, pid := range pids {
		s.alfred[pid] = procTicks(pid)
	}
	k8sDir := os.Getenv("ALFRED_K8S_DIR")
	if k8sDir == "" {
		k8sDir = "/tmp/alfred-k8s"
	}
	entries, err := os.ReadDir("/proc")
	require.NoError(b, err)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			continue
		}
		switch c := strings.TrimSpace(string(comm)); {
		case c == "postgres":
			s.pg[pid] = procTicks(pid)
		case c == "etcd" || strings.HasPrefix(c, "kube"):
			s.kube[pid] = procTicks(pid)
		case strings.HasPrefix(c, "containerd"):
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if strings.Contains(string(cmdline), k8sDir) {
				s.kube[pid] = procTicks(pid)
			}
		}
	}
	stat, err := os.ReadFile("/proc/stat")
	require.NoError(b, err)
	fields := strings.Fields(strings.SplitN(string(stat), "\n", 2)[0])[1:]
	for i, f := range fields {
		v, _ := strconv.ParseInt(f, 10, 64)
		s.total += v
		if i != 3 && i != 4 && i < 8 { // not idle, not iowait, not guest (counted in user)
			s.busy += v
		}
	}
	return s
}

// procTicks is the user and system time of pid in clock ticks (0 if it is gone).
func procTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command may hold spaces: the fields start after its closing parenthesis.
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// since is the CPU used from before to s.
func (s cpuSample) since(before cpuSample) cpuUse {
	diff := func(now, then map[int]int64) float64 {
		var t int64
		for pid, v := range now {
			t += v - then[pid]
		}
		return float64(t) * 10 // ticks of 10 ms
	}
	return cpuUse{alfred: diff(s.alfred, before.alfred), kube: diff(s.kube, before.kube), pg: diff(s.pg, before.pg),
		busy: float64(s.busy-before.busy) / float64(max(1, s.total-before.total))}
}
