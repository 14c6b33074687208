package kubernetes_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// cluster returns a clientset for the test cluster and a fresh namespace of this test's own
// (kubetest).
func cluster(t *testing.T) (*k8s.Clientset, string) {
	t.Helper()
	_, cs := kubetest.Kubeconfig(t)
	return cs, kubetest.Namespace(t, cs)
}

// probeImage builds the conformance probe with Docker and imports it into the test cluster's
// containerd (no registry is reachable).
func probeImage(t *testing.T) string {
	t.Helper()
	cli := runtimetest.Client(t)
	tag := runtimetest.BuildImage(t, t.Context(), cli, "alfred-test/k8s-probe:"+kubetest.RandomHex(t, 4), runtimetest.ProbePackage)
	kubetest.ImportImage(t, tag)
	return tag
}

// testOptions are the Runtime's options on the test cluster: imported images only, a grace of
// one second (the conformance suite's Stop grace), and small requests so that the suite's
// parallel Pods fit on the node's two cores.
func testOptions(ns string) kubernetes.Options {
	return kubernetes.Options{
		Namespace:  ns,
		PullPolicy: corev1.PullNever,
		StopGrace:  time.Second,
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("10m"),
			corev1.ResourceMemory: resource.MustParse("16Mi"),
		},
	}
}

// TestRuntimeConformance runs the runner.Runtime contract on the test cluster, with the logs
// merged (Kubernetes' log API).
func TestRuntimeConformance(t *testing.T) {
	cs, ns := cluster(t)
	image := probeImage(t)
	runtimetest.RunRuntimeConformanceWith(t, kubernetes.New(cs, testOptions(ns)), image,
		runtimetest.ConformanceOptions{MergedLogs: true})
}

// TestRuntimeSecret: the environment goes to a Secret owned by the Pod and never into the Pod;
// a Secret already holding the name is a conflict, left alone, and no Pod is created; Destroy
// removes the Secret with the Pod.
func TestRuntimeSecret(t *testing.T) {
	cs, ns := cluster(t)
	image := probeImage(t)
	rt := kubernetes.New(cs, testOptions(ns))
	spec := runner.ContainerSpec{
		Name:   "alfred-secret-" + kubetest.RandomHex(t, 4),
		Image:  image,
		Cmd:    []string{"sleep", "60"},
		Env:    []string{"TOKEN=hunter2-in-test"},
		User:   runtimetest.ImageUser,
		Labels: map[string]string{runner.LabelManaged: "true"},
	}
	h, err := rt.Start(t.Context(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Destroy(context.Background(), h.ID) })

	pod, err := cs.CoreV1().Pods(ns).Get(t.Context(), spec.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, pod.String(), "hunter2")
	secret, err := cs.CoreV1().Secrets(ns).Get(t.Context(), spec.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "hunter2-in-test", string(secret.Data["TOKEN"]))
	require.Len(t, secret.OwnerReferences, 1)
	require.Equal(t, pod.UID, secret.OwnerReferences[0].UID)

	require.NoError(t, rt.Destroy(t.Context(), h.ID))
	_, err = cs.CoreV1().Secrets(ns).Get(t.Context(), spec.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "secret left: %v", err)

	// A foreign Secret holds the name: refused, left alone, no Pod.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: spec.Name}, StringData: map[string]string{"x": "y"}}
	foreign, err = cs.CoreV1().Secrets(ns).Create(t.Context(), foreign, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = rt.Start(t.Context(), spec)
	require.ErrorIs(t, err, runner.ErrNameConflict)
	require.NotContains(t, err.Error(), "hunter2")
	still, err := cs.CoreV1().Secrets(ns).Get(t.Context(), spec.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, foreign.UID, still.UID)
	_, err = cs.CoreV1().Pods(ns).Get(t.Context(), spec.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a pod was created: %v", err)

	// A Pod holds the name of a run with an environment: refused, and the Secret this Start
	// created is removed again.
	holder := spec
	holder.Name, holder.Env = "alfred-holder-"+kubetest.RandomHex(t, 4), nil
	hh, err := rt.Start(t.Context(), holder)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Destroy(context.Background(), hh.ID) })
	again := spec
	again.Name = holder.Name
	_, err = rt.Start(t.Context(), again)
	require.ErrorIs(t, err, runner.ErrNameConflict)
	_, err = cs.CoreV1().Secrets(ns).Get(t.Context(), holder.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the secret of the refused start is left: %v", err)
	adopted, err := rt.Adopt(t.Context(), holder.Name)
	require.NoError(t, err)
	require.True(t, adopted.Running, "the holder still runs")
}

// TestRuntimeDeadline: Options.Timeout ends the run on the kubelet's side, and a Stop is seen
// by another Runtime (a restarted Alfred) as Killed too, since both end the Pod by its
// deadline; the Pod and its logs stay readable after the kill.
func TestRuntimeDeadline(t *testing.T) {
	cs, ns := cluster(t)
	image := probeImage(t)
	spec := func(name string) runner.ContainerSpec {
		return runner.ContainerSpec{Name: name + "-" + kubetest.RandomHex(t, 4), Image: image, Cmd: []string{"sleep", "60"},
			User: runtimetest.ImageUser, Labels: map[string]string{runner.LabelManaged: "true"}}
	}
	opts := testOptions(ns)
	opts.Timeout = time.Second
	timed := kubernetes.New(cs, opts)
	h, err := timed.Start(t.Context(), spec("alfred-deadline"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = timed.Destroy(context.Background(), h.ID) })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	st, err := timed.Wait(ctx, h.ID)
	require.NoError(t, err)
	require.True(t, st.Killed)
	require.NotEqual(t, 0, st.Code)
	_, _, err = timed.Logs(ctx, h.ID)
	require.NoError(t, err)

	rt := kubernetes.New(cs, testOptions(ns))
	h, err = rt.Start(t.Context(), spec("alfred-stopped"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Destroy(context.Background(), h.ID) })
	require.NoError(t, rt.Stop(ctx, h.ID, time.Second))
	st, err = kubernetes.New(cs, testOptions(ns)).Wait(ctx, h.ID)
	require.NoError(t, err)
	require.True(t, st.Killed, "another Runtime sees the stop")
	adopted, err := rt.Adopt(ctx, h.Name)
	require.NoError(t, err)
	require.False(t, adopted.Running)
}

// TestRuntimeStartTimeoutNamesTheScheduler: a Pod no node can take (it asks for more CPU than
// the node has) fails Start at StartTimeout with the scheduler's reason, not "no container
// status", and what Start created (the Pod and its Secret) is removed.
func TestRuntimeStartTimeoutNamesTheScheduler(t *testing.T) {
	cs, ns := cluster(t)
	image := probeImage(t)
	opts := testOptions(ns)
	opts.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")}
	rt := kubernetes.New(cs, opts)
	rt.StartTimeout = 3 * time.Second
	name := "alfred-unschedulable-" + kubetest.RandomHex(t, 4)
	_, err := rt.Start(t.Context(), runner.ContainerSpec{Name: name, Image: image, Cmd: []string{"sleep", "60"},
		User: runtimetest.ImageUser, Env: []string{"AGENT_KEY=k"},
		Limits: runner.Limits{NanoCPUs: 64e9}, Labels: map[string]string{runner.LabelManaged: "true"}})
	require.ErrorContains(t, err, "container not running after 3s, runner.kubernetes.start_timeout")
	require.ErrorContains(t, err, "Unschedulable: ")
	require.ErrorContains(t, err, "Insufficient cpu")
	_, err = cs.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Pod Start created is removed: %v", err)
	_, err = cs.CoreV1().Secrets(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Secret Start created is removed: %v", err)
}

// TestRuntimeStateClaim: a run's mounts are sub-paths of the state claim. The Pod reads its
// input and writes its output as the non-root run user through the claim, Alfred reads the
// output in its own data directory, and a read-only sub-path refuses writes.
func TestRuntimeStateClaim(t *testing.T) {
	cs, ns := cluster(t)
	image := probeImage(t)
	root := t.TempDir()
	opts := testOptions(ns)
	opts.StateClaim, opts.StateRoot = kubetest.StateClaim(t, cs, ns, root), root
	rt := kubernetes.New(cs, opts)

	name := "alfred-claim-" + kubetest.RandomHex(t, 4)
	in, out := filepath.Join(root, "runs", name, "in"), filepath.Join(root, "runs", name, "out")
	require.NoError(t, os.MkdirAll(in, 0o755))
	require.NoError(t, os.MkdirAll(out, 0o777))
	require.NoError(t, os.Chmod(out, 0o777))
	run := func(suffix string, cmd ...string) (runner.ExitState, string) {
		spec := runner.ContainerSpec{
			Name: name + suffix, Image: image, Cmd: cmd, User: runtimetest.ImageUser,
			Labels: map[string]string{runner.LabelManaged: "true"},
			Mounts: []runner.Mount{{Source: in, Target: runner.InputDir, ReadOnly: true}, {Source: out, Target: runner.OutputDir}},
		}
		h, err := rt.Start(t.Context(), spec)
		require.NoError(t, err)
		t.Cleanup(func() { _ = rt.Destroy(context.Background(), h.ID) })
		st, err := rt.Wait(t.Context(), h.ID)
		require.NoError(t, err)
		stdout, _, err := rt.Logs(t.Context(), h.ID)
		require.NoError(t, err)
		return st, string(stdout)
	}

	st, log := run("-w", "try-write", runner.OutputDir+"/result.json")
	require.Equal(t, 0, st.Code, log)
	b, err := os.ReadFile(filepath.Join(out, "result.json"))
	require.NoError(t, err, "the run's output is in Alfred's data directory")
	require.Equal(t, "probe\n", string(b))

	st, log = run("-r", "try-write", runner.InputDir+"/x")
	require.Equal(t, 1, st.Code, "a read-only sub-path: %s", log)
	require.NoFileExists(t, filepath.Join(in, "x"))
}

// TestClusterReportNamesImportedImage: the report a failed test logs for each image it imported
// (kubetest.Report) shows containerd's record of an imported image with the CRI plugin's mark,
// the label `import` waits for, and says so of an image that was never imported, each under
// the reference containerd keeps.
func TestClusterReportNamesImportedImage(t *testing.T) {
	kubetest.Kubeconfig(t)
	tag := probeImage(t)
	never := "alfred-test/never-imported:" + kubetest.RandomHex(t, 4)
	report := kubetest.Report(t, tag, never)
	t.Logf("report:\n%s", report)

	sections := strings.Split(report, "== ")
	require.GreaterOrEqual(t, len(sections), 4, "a section per image and the kubelet's")
	imported, missing := sections[1], sections[2]
	require.True(t, strings.HasPrefix(imported, "docker.io/"+tag+"\n"), "the imported image's section: %q", imported)
	require.Regexp(t, `(?m)^containerd: sha256:[0-9a-f]{64} \S*io\.cri-containerd\.image=managed`, imported)
	require.True(t, strings.HasPrefix(missing, "docker.io/"+never+"\n"), "the missing image's section: %q", missing)
	require.Contains(t, missing, "containerd: no such image")
	require.True(t, strings.HasPrefix(sections[3], "kubelet: "), "the kubelet's section: %q", sections[3])
}
