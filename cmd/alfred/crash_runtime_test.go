package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// crashRuntime is the container runtime a crash case's `alfred serve` runs its phases on, as the
// test sees it: the Docker engine, or a namespace of the Kubernetes test cluster.
type crashRuntime interface {
	// prepare makes image available to the runtime and returns the runner section of the
	// configuration of an Alfred whose data_dir is dataDir ("" for the default, Docker).
	prepare(t *testing.T, image, dataDir string) string
	// devRunning returns the ids of the running development containers of the Alfred whose
	// instance label is instance.
	devRunning(t *testing.T, instance string) []string
	// state returns whether container id runs and, once it has ended, its exit code.
	state(t *testing.T, id string) (running bool, exit int)
	// remove removes container id as an operator would, and returns once it is gone.
	remove(t *testing.T, id string)
	// done checks, once the lifecycle is done, what the runtime holds of it: nothing left, and
	// what it ran for the development runs (runs, in order); token is the forge token.
	done(t *testing.T, dataDir, token string, runs []crashRun)
}

// dockerCrash is crashRuntime on the Docker engine.
type dockerCrash struct{ cli *client.Client }

func newDockerCrash(t *testing.T) *dockerCrash { return &dockerCrash{cli: runtimetest.Client(t)} }

func (d *dockerCrash) prepare(*testing.T, string, string) string { return "" }

func (d *dockerCrash) devRunning(t *testing.T, instance string) []string {
	list, err := d.cli.ContainerList(context.Background(), container.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", runner.LabelManaged+"=true"), filters.Arg("label", runner.LabelPhase+"=development"),
		filters.Arg("label", runner.LabelInstance+"="+instance))})
	require.NoError(t, err)
	var ids []string
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids
}

func (d *dockerCrash) state(t *testing.T, id string) (bool, int) {
	info, err := d.cli.ContainerInspect(context.Background(), id)
	require.NoError(t, err)
	return info.State.Running, info.State.ExitCode
}

// remove removes the container as an operator would while Alfred is down. Its egress network
// (named as the container) stays behind until a later run of that installation prunes it, ten
// minutes on (spec/security.md); the test's own installation never gets there, so the test
// removes the network when it ends.
func (d *dockerCrash) remove(t *testing.T, id string) {
	info, err := d.cli.ContainerInspect(context.Background(), id)
	require.NoError(t, err)
	require.NoError(t, d.cli.ContainerRemove(context.Background(), id, container.RemoveOptions{Force: true}))
	if name := strings.TrimPrefix(info.Name, "/"); info.HostConfig != nil && string(info.HostConfig.NetworkMode) == name {
		t.Cleanup(func() { _ = d.cli.NetworkRemove(context.Background(), name) })
	}
}

func (d *dockerCrash) done(t *testing.T, dataDir, _ string, _ []crashRun) {
	requireNoLeftovers(t, dataDir)
}

// kubeCrash is crashRuntime on a namespace of the test's own on the Kubernetes test cluster,
// the state claim on the Alfred's data_dir; every Pod and Secret made in it is recorded.
type kubeCrash struct {
	kubeconfig string
	cs         k8s.Interface
	ns         string
	rec        *kubeRecorder
}

// newKubeCrash skips the test without the test cluster (fails it under CI).
func newKubeCrash(t *testing.T) *kubeCrash {
	kubeconfig, cs := kubetest.Kubeconfig(t)
	ns := kubetest.Namespace(t, cs)
	return &kubeCrash{kubeconfig: kubeconfig, cs: cs, ns: ns, rec: recordKube(t, cs, ns)}
}

func (k *kubeCrash) prepare(t *testing.T, image, dataDir string) string {
	kubetest.ImportImage(t, image)
	claim := kubetest.StateClaim(t, k.cs, k.ns, dataDir)
	// A small CPU request: the Pods of several tests share the cluster's cores.
	return fmt.Sprintf(`runner:
  memory_bytes: 268435456
  runtime: kubernetes
  egress: {mode: open}  # not this test's subject: runner/redteam_egress_kubernetes_test.go
  kubernetes: {kubeconfig: %s, namespace: %s, state_claim: %s, pull_policy: Never, requests: {cpu: 50m, memory: 64Mi}}
`, k.kubeconfig, k.ns, claim)
}

func (k *kubeCrash) pod(t *testing.T, id string) *corev1.Pod {
	p, err := k.cs.CoreV1().Pods(k.ns).Get(context.Background(), id, metav1.GetOptions{})
	require.NoError(t, err)
	return p
}

func (k *kubeCrash) devRunning(t *testing.T, instance string) []string {
	list, err := k.cs.CoreV1().Pods(k.ns).List(context.Background(), metav1.ListOptions{LabelSelector: labels.SelectorFromSet(map[string]string{
		runner.LabelManaged: "true", runner.LabelPhase: "development", runner.LabelInstance: instance}).String()})
	require.NoError(t, err)
	var ids []string
	for i := range list.Items {
		if cs := kubernetes.RunContainerStatus(&list.Items[i]); cs != nil && cs.State.Running != nil {
			ids = append(ids, list.Items[i].Name)
		}
	}
	return ids
}

func (k *kubeCrash) state(t *testing.T, id string) (bool, int) {
	cs := kubernetes.RunContainerStatus(k.pod(t, id))
	require.NotNil(t, cs, "pod %s has no container status", id)
	if cs.State.Terminated != nil {
		return false, int(cs.State.Terminated.ExitCode)
	}
	return true, 0
}

// remove deletes the Pod as `kubectl delete pod --now` does; its Secret, owned by the Pod, is
// left to the cluster's garbage collector.
func (k *kubeCrash) remove(t *testing.T, id string) {
	ctx := context.Background()
	require.NoError(t, k.cs.CoreV1().Pods(k.ns).Delete(ctx, id, metav1.DeleteOptions{GracePeriodSeconds: new(int64(1))}))
	require.Eventually(t, func() bool {
		_, err := k.cs.CoreV1().Pods(k.ns).Get(ctx, id, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "pod %s never went", id)
}

// done checks that every development run attempt ran as exactly one Pod (none was run twice
// across the restart), that the Pods were hardened (requireHardenedRunPods), and that nothing
// is left (requireNoKubeLeftovers; a Secret whose Pod was removed is the garbage collector's).
func (k *kubeCrash) done(t *testing.T, dataDir, token string, runs []crashRun) {
	dev := k.rec.Pods(map[string]string{runner.LabelManaged: "true", runner.LabelPhase: "development",
		runner.LabelInstance: runner.InstanceID(dataDir)})
	var want, got []string
	for _, r := range runs {
		want = append(want, strconv.FormatInt(r.ID, 10)+"/"+strconv.Itoa(r.Attempt))
	}
	for _, p := range dev {
		got = append(got, p.Labels[runner.LabelRun]+"/"+p.Labels[runner.LabelAttempt])
	}
	require.Equal(t, want, got, "one development Pod per run attempt (run/attempt)")
	requireHardenedRunPods(t, k.rec, kubetest.ClaimName, token)
	require.Eventually(t, func() bool {
		s, err := k.cs.CoreV1().Secrets(k.ns).List(context.Background(), metav1.ListOptions{LabelSelector: runner.LabelManaged + "=true"})
		require.NoError(t, err)
		return len(s.Items) == 0
	}, time.Minute, 100*time.Millisecond, "a run's Secret was left behind")
	requireNoKubeLeftovers(t, k.cs, k.ns, dataDir)
}
