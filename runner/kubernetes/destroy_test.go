package kubernetes_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// TestRuntimeDestroyGrace: Destroy deletes a Pod whose container has ended at once (grace 0,
// no graceful deletion for the kubelet to confirm, which held every phase about 2 s on the
// test cluster), and still gives a running container DestroyGrace. It reads the grace from the
// Pod's own watch events, not from a clock.
func TestRuntimeDestroyGrace(t *testing.T) {
	cs, ns := cluster(t)
	image := probeImage(t)
	rt := kubernetes.New(cs, testOptions(ns))
	rt.DestroyGrace = 3 * time.Second
	ctx := t.Context()
	// graces returns the deletion grace periods the Pod's watch events showed while Destroy
	// removed it, in order.
	graces := func(cmd ...string) []int64 {
		spec := runner.ContainerSpec{Name: "alfred-grace-" + kubetest.RandomHex(t, 4), Image: image, Cmd: cmd,
			User: runtimetest.ImageUser, Env: []string{"HOME=/home/alfred"}, Labels: map[string]string{runner.LabelManaged: "true"}}
		h, err := rt.Start(ctx, spec)
		require.NoError(t, err)
		t.Cleanup(func() { _ = rt.Destroy(context.Background(), h.ID) })
		if cmd[0] == "exit" {
			st, err := rt.Wait(ctx, h.ID)
			require.NoError(t, err)
			require.Equal(t, 0, st.Code)
		} else {
			// Running, not only created: the API server deletes a Pod not yet bound to a node
			// at once whatever grace it is asked for. The container sleeps an hour: a watch has
			// taken a minute to send its first event, by which time a shorter sleep had ended
			// and its Pod was rightly deleted at once (grace [0 0], about 66 s).
			require.Eventually(t, func() bool {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, spec.Name, metav1.GetOptions{})
				if err != nil {
					return false
				}
				st := kubernetes.RunContainerStatus(p)
				return st != nil && st.State.Running != nil
			}, 3*time.Minute, 100*time.Millisecond, "the Pod's container never ran")
		}
		// The watch starts from the Pod as the API server's watch cache has it (a read at
		// resource version "0" is served by the cache), so it is established at once and sees
		// every later change. A watch from no resource version waits until the cache has caught
		// up with etcd, which on a cluster where nothing else was written took over six minutes.
		p, err := cs.CoreV1().Pods(ns).Get(ctx, spec.Name, metav1.GetOptions{ResourceVersion: "0"})
		require.NoError(t, err)
		w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", spec.Name).String(),
			ResourceVersion: p.ResourceVersion})
		require.NoError(t, err)
		defer w.Stop()
		require.NoError(t, rt.Destroy(ctx, h.ID))
		var out []int64
		for ev := range w.ResultChan() {
			require.NotEqual(t, watch.Error, ev.Type, "watch event %v", ev.Object)
			p, ok := ev.Object.(*corev1.Pod)
			require.True(t, ok, "watch event %s: %v", ev.Type, ev.Object)
			if p.DeletionGracePeriodSeconds != nil {
				out = append(out, *p.DeletionGracePeriodSeconds)
			}
			if ev.Type == watch.Deleted {
				return out
			}
		}
		t.Fatal("the watch ended before the Pod was deleted")
		return nil
	}
	ended := graces("exit", "0")
	require.NotEmpty(t, ended)
	for _, g := range ended {
		require.Zero(t, g, "an ended container's Pod is deleted at once: %v", ended)
	}
	require.Contains(t, graces("sleep", "3600"), int64(3), "a running container gets DestroyGrace")
}
