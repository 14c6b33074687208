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
			// at once whatever grace it is asked for. The container sleeps an hour: the watch
			// below has taken a minute to send its first event, by which time a shorter sleep
			// had ended and its Pod was rightly deleted at once (grace [0 0], about 66 s).
			require.Eventually(t, func() bool {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, spec.Name, metav1.GetOptions{})
				if err != nil {
					return false
				}
				st := kubetest.RunStatus(p)
				return st != nil && st.State.Running != nil
			}, 3*time.Minute, 100*time.Millisecond, "the Pod's container never ran")
		}
		// The watch is established once it has sent the Pod as it is now (a watch from no
		// resource version starts with an ADDED event of each object). An ERROR first (the API
		// server's watch cache behind its store, as after an etcd restart: "Too large resource
		// version") opens it again.
		var w watch.Interface
		for {
			w, err = cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", spec.Name).String()})
			require.NoError(t, err)
			ev, open := <-w.ResultChan()
			require.True(t, open, "the watch closed before its first event")
			if ev.Type == watch.Added {
				break
			}
			w.Stop()
		}
		defer w.Stop()
		require.NoError(t, rt.Destroy(ctx, h.ID))
		var out []int64
		for ev := range w.ResultChan() {
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
