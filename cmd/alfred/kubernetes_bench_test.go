package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// benchCluster is a test's own corner of the test cluster: its kubeconfig, a clientset, a
// namespace of its own and a watch of that namespace's Pods.
type benchCluster struct {
	kubeconfig string
	cs         *k8s.Clientset
	ns         string
	pods       *podClock
}

// newBenchCluster returns the test cluster with a namespace of the test's own and a running Pod
// clock on it; it skips the benchmark without a cluster (kubetest.Kubeconfig).
func newBenchCluster(tb testing.TB) *benchCluster {
	tb.Helper()
	path, cs := kubetest.Kubeconfig(tb)
	ns := kubetest.Namespace(tb, cs)
	return &benchCluster{kubeconfig: path, cs: cs, ns: ns, pods: watchPods(tb, cs, ns)}
}

// useKubernetes returns the configuration change that makes a loaded configuration run its
// phases as Pods in the cluster's namespace, with the state claim of the configuration's own
// data_dir (created here) and imported images only.
func (k *benchCluster) useKubernetes(tb testing.TB) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.Runner.Runtime = config.RuntimeKubernetes
		cfg.Runner.Kubernetes = config.Kubernetes{Kubeconfig: k.kubeconfig, Namespace: k.ns,
			StateClaim: kubetest.StateClaim(tb, k.cs, k.ns, cfg.DataDir), PullPolicy: string(corev1.PullNever)}
		cfg.Runner.Egress.Mode = config.EgressOpen // the egress gate's cost is not measured here
	}
}

// podClock records, by this process's clock, when the watch of a namespace first saw each Pod
// (≈ its creation in the API server), first saw its container running or ended (the kubelet's
// status report, which can come after the container has started) and saw it deleted.
type podClock struct {
	mu      sync.Mutex
	added   map[string]time.Time
	running map[string]time.Time
	deleted map[string]time.Time
	labels  map[string]map[string]string
}

// watchPods starts a podClock on ns; it stops when the test ends.
func watchPods(tb testing.TB, cs k8s.Interface, ns string) *podClock {
	tb.Helper()
	c := &podClock{added: map[string]time.Time{}, running: map[string]time.Time{}, deleted: map[string]time.Time{},
		labels: map[string]map[string]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(tb, err)
	rv := list.ResourceVersion
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				if ctx.Err() == nil {
					tb.Logf("watch pods in %s: %v (again)", ns, err)
					time.Sleep(50 * time.Millisecond)
				}
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				switch ev.Type {
				case watch.Added, watch.Modified:
					c.see(p, time.Now())
				case watch.Deleted:
					c.see(p, time.Now())
					c.mu.Lock()
					c.deleted[p.Name] = time.Now()
					c.mu.Unlock()
				}
			}
			w.Stop()
		}
	}()
	tb.Cleanup(func() { cancel(); <-done })
	return c
}

func (c *podClock) see(p *corev1.Pod, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.added[p.Name]; !ok {
		c.added[p.Name] = now
		c.labels[p.Name] = p.Labels
	}
	if _, ok := c.running[p.Name]; ok {
		return
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running != nil || s.State.Terminated != nil {
			c.running[p.Name] = now
		}
	}
}

// lifetimes returns, for every Pod carrying runner.LabelManaged=true first seen after since and
// deleted, the time from first seen to deleted.
func (c *podClock) lifetimes(since time.Time) []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Duration
	for n, added := range c.added {
		if gone, ok := c.deleted[n]; ok && added.After(since) && c.labels[n][runner.LabelManaged] == "true" {
			out = append(out, gone.Sub(added))
		}
	}
	return out
}

// find returns the name of the Pod carrying every label of sel, and when it was first seen
// and seen running (zero if not yet).
func (c *podClock) find(sel map[string]string) (name string, added, running time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, ls := range c.labels {
		match := true
		for k, v := range sel {
			if ls[k] != v {
				match = false
				break
			}
		}
		if match {
			return n, c.added[n], c.running[n], true
		}
	}
	return "", time.Time{}, time.Time{}, false
}

// BenchmarkTriggerToAgentKubernetes is BenchmarkTriggerToAgent (small repository) with
// runner.runtime: kubernetes: from the webhook that adds ai::validate_plan to an issue waiting
// for validation until the development agent, a Pod on the test cluster mounting its worktree
// from the state claim (the e2e data_dir, kubetest.StateClaim), has written its first file (the
// marker, polled every millisecond in the worktree). In the same iteration, outside the
// trigger's time, a bare Pod of the same image (created with client-go in the same namespace:
// the image's own user, no Secret, no limits, no hardening; its script, input and workspace
// sub-paths of the same claim) writes the same marker the same way: "agent started" is, on
// both sides, the agent process having written its first file, seen on this machine's file
// system, and the bare time runs from the Create call. Outside the times, the bare Pod is
// waited to Succeeded and deleted, and each issue reaches status::in_ci and is closed.
//
// Reported medians: trigger-ms, bare-ms and their ratio; and where the trigger's time goes,
// from a watch of the namespace: alfred-ms (webhook → the Pod seen in the API server: delivery,
// mailbox, comment, worktree, Secret and Pod created; split at the development run's row into
// machine-ms, the delivery through the mailbox's step until the run starts, and prepare-ms,
// the run's worktree, directories, rows, Secret and Pod), pod-ms (the Pod seen → the marker: the
// scheduler, the kubelet and the container start) and its bare twin bare-pod-ms.
func BenchmarkTriggerToAgentKubernetes(b *testing.B) {
	k := newBenchCluster(b)
	agents, image := scriptAgents(b, triggerScript)
	kubetest.ImportImage(b, image)
	e := startE2EConfig(b, storeSQLite, forge.KindForgejo, "acceptance/sandbox", 24*time.Hour, agents, k.useKubernetes(b))
	bare := newBarePod(b, k, image, e.srv.cfg.DataDir)
	var trigger, plain, alfred, pod, barePod, machine, prepare []time.Duration
	for b.Loop() {
		took, podSeen := bare.run(b)
		plain, barePod = append(plain, took), append(barePod, podSeen)
		r := e.triggerOnceOn(b, k.pods)
		trigger, alfred, pod = append(trigger, r.total), append(alfred, r.alfred), append(pod, r.pod)
		machine, prepare = append(machine, r.machine), append(prepare, r.prepare)
	}
	b.ReportMetric(medianMS(trigger), "trigger-ms")
	b.ReportMetric(medianMS(plain), "bare-ms")
	b.ReportMetric(medianMS(trigger)/medianMS(plain), "ratio")
	b.ReportMetric(medianMS(alfred), "alfred-ms")
	b.ReportMetric(medianMS(pod), "pod-ms")
	b.ReportMetric(medianMS(barePod), "bare-pod-ms")
	b.ReportMetric(medianMS(machine), "machine-ms")
	b.ReportMetric(medianMS(prepare), "prepare-ms")
}

// medianMS is the median of ds in milliseconds (ds is sorted in place).
func medianMS(ds []time.Duration) float64 {
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Microseconds()) / 1000
}

// triggerTimes is one trigger's time and its parts (see BenchmarkTriggerToAgentKubernetes).
type triggerTimes struct{ total, alfred, pod, machine, prepare time.Duration }

// triggerOnceOn is triggerOnce on the Kubernetes runtime: it also returns when the clock saw
// the development run's Pod (labelled with the mailbox and the phase).
func (e *e2e) triggerOnceOn(b *testing.B, clock *podClock) triggerTimes {
	b.Helper()
	var r triggerTimes
	var start time.Time
	r.total = e.triggerOnceHook(b, func(mailboxID int64, started, marked time.Time) {
		start = started
		name, added, _, ok := clock.find(map[string]string{runner.LabelMailbox: fmt.Sprint(mailboxID), runner.LabelPhase: "development"})
		require.True(b, ok, "no development Pod of mailbox %d seen in the namespace", mailboxID)
		require.True(b, added.Before(marked), "Pod %s seen after its marker", name)
		r.alfred, r.pod = added.Sub(start), marked.Sub(added)
		runs, err := e.srv.store.Runs(context.Background(), mailboxID)
		require.NoError(b, err)
		for _, run := range runs {
			if run.Phase == "development" {
				r.machine, r.prepare = run.StartedAt.Sub(start), added.Sub(run.StartedAt)
			}
		}
	})
	return r
}

// barePod runs the script agent's image as a bare Pod (see BenchmarkTriggerToAgentKubernetes)
// in a directory of the state claim (dir, under the claim's root root).
type barePod struct {
	k          *benchCluster
	image, dir string
	rel        string // dir relative to the claim's root
	iteration  int
}

func newBarePod(b *testing.B, k *benchCluster, image, root string) *barePod {
	b.Helper()
	rel := "bench-bare"
	dir := filepath.Join(root, rel)
	require.NoError(b, os.MkdirAll(dir, 0o755))
	require.NoError(b, os.WriteFile(filepath.Join(dir, "script.yaml"), []byte(triggerScript), 0o644))
	require.NoError(b, os.WriteFile(filepath.Join(dir, "input.json"),
		[]byte(`{"phase":"development","attempt":1,"repo":"acceptance/sandbox","issue":1}`), 0o644))
	return &barePod{k: k, image: image, dir: dir, rel: rel}
}

// run creates the bare Pod and returns the time from the Create call until the marker appears,
// and from the Pod seen by the clock until then; it then waits for the Pod to succeed and
// deletes it, waiting until it is gone.
func (r *barePod) run(b *testing.B) (took, podSeen time.Duration) {
	b.Helper()
	ctx := context.Background()
	r.iteration++
	ws, out := filepath.Join(r.dir, "ws"), filepath.Join(r.dir, "out")
	for _, d := range []string{ws, out} {
		require.NoError(b, os.RemoveAll(d))
		require.NoError(b, os.Mkdir(d, 0o777))
		require.NoError(b, os.Chmod(d, 0o777))
	}
	marker := filepath.Join(ws, markerFile)
	name := fmt.Sprintf("bare-%d", r.iteration)
	pods := r.k.cs.CoreV1().Pods(r.k.ns)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench": name}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "bare", Image: r.image, ImagePullPolicy: corev1.PullNever,
				Args:         []string{"-script", "/bench/script.yaml", "-input", "/bench/input.json", "-workspace", "/bench/ws", "-out", "/bench/out"},
				VolumeMounts: []corev1.VolumeMount{{Name: "state", MountPath: "/bench", SubPath: r.rel}}}},
			Volumes: []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: kubetest.ClaimName}}}},
		},
	}
	start := time.Now()
	_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(b, err)
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(time.Millisecond)
	for {
		if _, err := os.Stat(marker); err == nil {
			break
		}
		require.True(b, time.Now().Before(deadline), "the bare Pod %s never wrote its marker", name)
		<-tick.C
	}
	tick.Stop()
	took = time.Since(start)
	_, added, _, ok := r.k.pods.find(map[string]string{"bench": name})
	require.True(b, ok, "the clock never saw the bare Pod %s", name)
	podSeen = start.Add(took).Sub(added)

	require.Eventually(b, func() bool {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		require.NoError(b, err)
		require.NotEqual(b, corev1.PodFailed, p.Status.Phase, "bare Pod %s failed: %+v", name, p.Status)
		return p.Status.Phase == corev1.PodSucceeded
	}, 2*time.Minute, 20*time.Millisecond, "the bare Pod %s never succeeded", name)
	require.NoError(b, pods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}))
	require.Eventually(b, func() bool {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 2*time.Minute, 20*time.Millisecond, "the bare Pod %s never went", name)
	return took, podSeen
}
