package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/alfred-bot/alfred/internal/config"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// kubernetesScript is lifecycleScript (questions, a plan, the development, a CI fix) with a
// review fix, so one issue goes through every phase that runs an agent in a Pod.
const kubernetesScript = lifecycleScript + `
review_fix:
  summary: Addressed the review.
  commit_message: "Add the currency column"
  files:
    export.csv: "date;amount;category;currency\n"
  comment_rules:
    - {match: "", outcome: fixed, reply: "Added the currency column."}
`

// kubeRecorder records every Pod and Secret created in a test's namespace, as first seen, from
// the moment recordKube returns: what ran is checked after the runs' objects are gone.
type kubeRecorder struct {
	mu      sync.Mutex
	pods    []*corev1.Pod
	secrets []*corev1.Secret
	seen    map[types.UID]bool
}

// recordKube starts recording the Pods and Secrets of ns (informers, so a closed watch is
// resumed) and stops when the test ends.
func recordKube(t testing.TB, cs k8s.Interface, ns string) *kubeRecorder {
	t.Helper()
	r := &kubeRecorder{seen: map[types.UID]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	add := func(obj any) {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch o := obj.(type) {
		case *corev1.Pod:
			if !r.seen[o.UID] {
				r.seen[o.UID] = true
				r.pods = append(r.pods, o.DeepCopy())
			}
		case *corev1.Secret:
			if !r.seen[o.UID] {
				r.seen[o.UID] = true
				r.secrets = append(r.secrets, o.DeepCopy())
			}
		}
	}
	h := cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
	_, err := f.Core().V1().Pods().Informer().AddEventHandler(h)
	require.NoError(t, err)
	_, err = f.Core().V1().Secrets().Informer().AddEventHandler(h)
	require.NoError(t, err)
	stop := make(chan struct{})
	f.Start(stop)
	for typ, ok := range f.WaitForCacheSync(stop) {
		require.True(t, ok, "informer of %v never synced", typ)
	}
	t.Cleanup(func() { close(stop); f.Shutdown() })
	return r
}

// Pods returns the Pods seen so far carrying every label of want, in the order they appeared.
func (r *kubeRecorder) Pods(want map[string]string) []*corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*corev1.Pod
	for _, p := range r.pods {
		if hasLabels(p.Labels, want) {
			out = append(out, p)
		}
	}
	return out
}

// Secrets returns the Secrets seen so far.
func (r *kubeRecorder) Secrets() []*corev1.Secret {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.secrets)
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// requireHardenedRunPods checks every run Pod seen in the namespace: its mounts are sub-paths
// of the state claim (no hostPath volume), its environment comes from its Secret only, and
// neither the Pod nor any Secret of the namespace holds the forge token.
func requireHardenedRunPods(t *testing.T, rec *kubeRecorder, claim, token string) {
	t.Helper()
	require.NotEmpty(t, token)
	pods := rec.Pods(map[string]string{runner.LabelManaged: "true"})
	require.NotEmpty(t, pods)
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			require.Nil(t, v.HostPath, "pod %s: hostPath volume %s", p.Name, v.Name)
			if v.PersistentVolumeClaim != nil {
				require.Equal(t, claim, v.PersistentVolumeClaim.ClaimName, "pod %s", p.Name)
			}
		}
		for _, c := range p.Spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.Name == "state" {
					require.NotEmpty(t, m.SubPath, "pod %s mounts the whole state claim at %s", p.Name, m.MountPath)
				}
			}
			for _, e := range c.Env {
				require.Empty(t, e.Value, "pod %s: %s has its value in the Pod", p.Name, e.Name)
				require.NotNil(t, e.ValueFrom.SecretKeyRef, "pod %s: %s", p.Name, e.Name)
			}
		}
		b, err := json.Marshal(p)
		require.NoError(t, err)
		require.NotContains(t, string(b), token, "pod %s holds the forge token", p.Name)
	}
	for _, s := range rec.Secrets() {
		for k, v := range s.Data {
			require.NotContains(t, string(v), token, "secret %s key %s holds the forge token", s.Name, k)
		}
	}
}

// requireNoKubeLeftovers checks that nothing of the test's Alfred is left: no Pod or Secret
// in ns, no container, worktree or run directory in dataDir (requireNoLeftovers).
func requireNoKubeLeftovers(t *testing.T, cs k8s.Interface, ns, dataDir string) {
	t.Helper()
	ctx := context.Background()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, pods.Items, "a Pod was left behind")
	secrets, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: runner.LabelManaged + "=true"})
	require.NoError(t, err)
	require.Empty(t, secrets.Items, "a run's Secret was left behind")
	requireNoLeftovers(t, dataDir)
	entries, _ := os.ReadDir(filepath.Join(dataDir, "runs"))
	require.Empty(t, entries, "a run directory was left behind")
}

// kubeConfig is the mutate func of startE2EConfig that runs the phases on the test cluster:
// the runtime kubernetes in ns, the state claim on the test's data_dir, images imported (no
// pull), and a small CPU limit (the runs' request too), so the Pods of several tests share the
// cluster's two cores. The egress allowlist is on, as by default: the egress gate is the code
// of `alfred egress-gate` alone in a small image (kubetest.GateImage, imported), dialling a
// listener of this machine's node address (the test cluster runs no kube-proxy: the API
// server's Service address, the gate's default, answers no Pod there). It records the forge token in *token.
func kubeConfig(t testing.TB, kubeconfig string, cs k8s.Interface, ns string, token *string) func(*config.Config) {
	gateImage := kubetest.GateImage(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(kubetest.NodeAddress(t, cs), "0"))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return func(cfg *config.Config) {
		dataDir, err := filepath.Abs(cfg.DataDir)
		require.NoError(t, err)
		cfg.Runner.Runtime = config.RuntimeKubernetes
		cfg.Runner.Kubernetes = config.Kubernetes{Kubeconfig: kubeconfig, Namespace: ns,
			StateClaim: kubetest.StateClaim(t, cs, ns, dataDir), PullPolicy: "Never",
			EgressGateImage: gateImage, EgressGateTarget: ln.Addr().String(),
			Requests: map[string]string{"cpu": "50m", "memory": "64Mi"}} // the tests beside share the node's two cores
		cfg.Runner.MemoryBytes = 256 << 20
		*token = cfg.Forges[0].Token.Reveal()
	}
}

// TestLifecycleKubernetes runs the whole lifecycle with runner.runtime kubernetes on the test
// cluster: assignment, questions, plan, development, merge request, failing CI and its fix, a
// review fixed, merge, done. Every phase ran as a Pod of the test's namespace, mounting only
// its run's sub-paths of the state claim, without the forge token, and nothing is left.
func TestLifecycleKubernetes(t *testing.T) {
	t.Parallel()
	kubeconfig, cs := kubetest.Kubeconfig(t)
	agents, image := scriptAgents(t, kubernetesScript)
	kubetest.ImportImage(t, image)
	ns := kubetest.Namespace(t, cs)
	rec := recordKube(t, cs, ns)
	var token string
	e := startE2EConfig(t, storePostgres, forge.KindForgejo, "acceptance/sandbox", time.Hour, agents,
		kubeConfig(t, kubeconfig, cs, ns, &token), "ALFRED_LIFECYCLE_REVIEW_QUIET=1s")
	ctx := context.Background()

	// Assignment, the question answered, the plan validated: the development's merge request.
	require.Equal(t, http.StatusAccepted, e.send("002-issue_assign-assigned", nil))
	e.waitStatus("status::waiting_info")
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"type::task"}, nil))
	e.labelsChanged("type::task")
	require.Eventually(t, func() bool { return strings.Contains(strings.Join(e.comments(), "\n"), "### q1. Which separator?") },
		e2eWait, 100*time.Millisecond, "no question block:\n%s", strings.Join(e.comments(), "\n---\n"))
	require.Equal(t, http.StatusAccepted, e.send("006-issue_comment-created", func(doc map[string]any) {
		doc["comment"].(map[string]any)["body"] = "q1: b"
		doc["comment"].(map[string]any)["id"] = 4242
	}))
	e.waitStatus("status::waiting_validation")
	require.Contains(t, e.forgejo.IssueBody(e.issue), "| q1. Which separator? | b. Semicolon | @alice |")
	require.NoError(t, e.api.SetLabels(ctx, e.issue, []string{"ai::validate_plan"}, nil))
	e.labelsChanged("ai::validate_plan")
	e.waitStatus("status::in_ci")
	mrs := e.forgejo.MergeRequests(e.issue.Repo)
	require.Len(t, mrs, 1)
	mr := mrs[0]
	head := e.git("rev-parse", mr.SourceBranch)
	require.Equal(t, "date;amount;category", e.git("show", head+":export.csv"))
	require.Equal(t, "Add CSV export|Alfred", e.git("log", "-1", "--format=%s|%an", head))

	// CI fails: ci_fix pushes a commit; CI passes.
	e.forgejo.SetCI(e.issue.Repo, head, forgetest.CIJob{Name: "ci/test", State: forge.CIFailed, Log: "--- FAIL: TestExport"})
	fixed := e.waitHead(mr.SourceBranch, head)
	require.Equal(t, "fixed", e.git("show", fixed+":export_test.txt"))
	e.greenCI(mr.SourceBranch)
	e.waitStatus("status::in_review")

	// alice requests a change in a review: review_fix commits on the branch and answers.
	rs := e.forgejo.(forgetest.ReviewSeeder)
	ids := rs.AddReview(e.issue.Repo, mr.Number, "alice", "changes_requested", "One thing to fix.",
		forgetest.SeedReviewComment{Path: "export.csv", NewLine: 1, Body: "Please add a currency column."})
	require.Equal(t, http.StatusAccepted, e.sendFrom("forgejo-live-review", "003-pull_request_review_rejected-reviewed", reviewDelivery(mr)))
	reviewed := e.waitHead(mr.SourceBranch, fixed)
	require.Equal(t, "date;amount;category;currency", e.git("show", reviewed+":export.csv"))
	require.Contains(t, e.waitReply(mr.Number, ids[0]).Body, "Added the currency column. Fixed in "+reviewed[:7])
	e.waitStatus("status::in_ci")
	e.greenCI(mr.SourceBranch)
	e.waitStatus("status::in_review")

	// alice merges.
	e.forgejo.MarkMerged(e.issue.Repo, mr.Number)
	require.Equal(t, http.StatusAccepted, e.send("022-pull_request-closed", func(doc map[string]any) {
		doc["number"] = mr.Number
		doc["pull_request"].(map[string]any)["number"] = mr.Number
		doc["pull_request"].(map[string]any)["head"].(map[string]any)["ref"] = mr.SourceBranch
	}))
	require.Equal(t, http.StatusAccepted, e.send("023-issues-closed", nil))
	e.waitStatus("status::done")
	require.Len(t, e.forgejo.MergeRequests(e.issue.Repo), 1, "one merge request")
	e.requireUniqueMarkers()

	// Every run with a container ran as a Pod of the namespace, named as its container record,
	// one per phase of the scenario.
	mb, err := e.srv.store.Find(ctx, e.issue)
	require.NoError(t, err)
	var records []struct {
		Name string `db:"container_name"`
		ID   string `db:"container_id"`
	}
	require.NoError(t, e.srv.store.DB().SelectContext(ctx, &records,
		`SELECT container_name, container_id FROM executors WHERE mailbox_id = $1 ORDER BY id`, mb.ID))
	pods := rec.Pods(map[string]string{runner.LabelManaged: "true", runner.LabelInstance: runner.InstanceID(e.srv.cfg.DataDir)})
	var podNames, phases []string
	for _, p := range pods {
		podNames = append(podNames, p.Name)
		phases = append(phases, p.Labels[runner.LabelPhase])
	}
	var recNames []string
	for _, r := range records {
		recNames = append(recNames, r.Name)
		require.Equal(t, r.Name, r.ID, "a run's container id is its Pod's name")
	}
	require.Equal(t, recNames, podNames, "every run ran as a Pod of the namespace")
	require.Equal(t, []string{"analysis", "analysis", "development", "ci_fix", "review_fix"}, phases, "the functional and technical analyses, then the phases that change the branch")
	requireHardenedRunPods(t, rec, kubetest.ClaimName, token)
	requireNoKubeLeftovers(t, cs, ns, e.srv.cfg.DataDir)
	// The egress allowlist: Alfred applied the runs' NetworkPolicy at start-up, and every run's
	// agent waited in the egress gate until it held the Pod.
	instance := runner.InstanceID(e.srv.cfg.DataDir)
	np, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, kubernetes.EgressPolicyName(instance), metav1.GetOptions{})
	require.NoError(t, err, "the runs' NetworkPolicy")
	require.Equal(t, map[string]string{runner.LabelManaged: "true", runner.LabelInstance: instance}, np.Spec.PodSelector.MatchLabels)
	for _, p := range pods {
		require.Len(t, p.Spec.InitContainers, 1, "pod %s", p.Name)
		require.Equal(t, kubernetes.GateContainerName, p.Spec.InitContainers[0].Name)
	}

	// The figures: each run from its start (the Pod's creation included) to its end.
	var runs []struct {
		Phase    string    `db:"phase"`
		Started  time.Time `db:"started_at"`
		Finished time.Time `db:"finished_at"`
	}
	require.NoError(t, e.srv.store.DB().SelectContext(ctx, &runs,
		`SELECT phase, started_at, finished_at FROM runs WHERE mailbox_id = $1 ORDER BY id`, mb.ID))
	for _, r := range runs {
		t.Logf("run %s: %s", r.Phase, r.Finished.Sub(r.Started).Round(10*time.Millisecond))
	}
}
