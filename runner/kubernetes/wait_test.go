package kubernetes_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes"
)

// TestWaitReadsPodStatus: how Wait reads the ends the test cluster cannot produce on demand
// (an OOM kill, an adopted Pod whose image is missing, a Pod that ended before its container
// ran), from Pod statuses as the kubelet writes them, on client-go's fake clientset.
func TestWaitReadsPodStatus(t *testing.T) {
	t.Parallel()
	pod := func(name string, st corev1.PodStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "alfred"}, Status: st}
	}
	container := func(s corev1.ContainerState) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: kubernetes.ContainerName, Image: "alfred/agent:missing", State: s}}
	}
	cs := fake.NewClientset(
		pod("oom", corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: container(corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}})}),
		pod("no-image", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: container(corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "image not present with pull policy Never"}})}),
		pod("deadline-before-start", corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded", Message: "Pod was active too long"}),
	)
	rt := kubernetes.New(cs, kubernetes.Options{Namespace: "alfred"})

	st, err := rt.Wait(t.Context(), "oom")
	require.NoError(t, err)
	require.Equal(t, runner.ExitState{Code: 137, OOMKilled: true}, st)

	_, err = rt.Wait(t.Context(), "no-image")
	require.ErrorIs(t, err, runner.ErrImageNotFound)

	st, err = rt.Wait(t.Context(), "deadline-before-start")
	require.NoError(t, err)
	require.Equal(t, -1, st.Code)
	require.True(t, st.Killed, "the deadline is Alfred's")
	require.Contains(t, st.Error, "DeadlineExceeded")

	_, err = rt.Wait(t.Context(), "absent")
	require.ErrorIs(t, err, runner.ErrContainerNotFound)
}

// TestWaitNamesTheClusterDisruption: the cluster, not the agent, ended the run's container: a
// node-pressure eviction (reason Evicted, SIGKILL: 137) and a drain (the DisruptionTarget
// condition; the CLI exits 0 on SIGTERM). Wait says so (Disrupted), so the run is not read as
// the agent's own end.
func TestWaitNamesTheClusterDisruption(t *testing.T) {
	t.Parallel()
	ended := func(code int32) []corev1.ContainerStatus {
		return []corev1.ContainerStatus{{Name: kubernetes.ContainerName, State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
	}
	msg := "The node was low on resource: memory."
	cs := fake.NewClientset(
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "evicted", Namespace: "alfred"}, Status: corev1.PodStatus{
			Phase: corev1.PodFailed, Reason: "Evicted", Message: msg, ContainerStatuses: ended(137)}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "drained", Namespace: "alfred"}, Status: corev1.PodStatus{
			Phase: corev1.PodSucceeded, ContainerStatuses: ended(0), Conditions: []corev1.PodCondition{{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: "alfred"}, Status: corev1.PodStatus{
			Phase: corev1.PodSucceeded, ContainerStatuses: ended(0)}},
	)
	rt := kubernetes.New(cs, kubernetes.Options{Namespace: "alfred"})
	for name, want := range map[string]string{"evicted": "evicted: " + msg,
		"drained": "EvictionByEvictionAPI: Eviction API: evicting", "done": ""} {
		st, err := rt.Wait(t.Context(), runner.ContainerID(name))
		require.NoError(t, err)
		require.Equal(t, want, st.Disrupted, name)
	}
}

// TestWaitOutlastsATransientAPIError: the watch Wait holds is dropped (the API server's
// request timeout, a restart) and the read that follows meets a 503 while the API server
// restarts: Wait tries again and returns the run's end, instead of failing a run that goes on
// in its Pod. A considered refusal (403) still fails at once.
func TestWaitOutlastsATransientAPIError(t *testing.T) {
	t.Parallel()
	pod := func(st corev1.PodStatus) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "alfred"}, Status: st}
	}
	running := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: kubernetes.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	done := corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name: kubernetes.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}}}
	for _, c := range []struct {
		name   string
		second error
		ok     bool
	}{
		{"503", apierrors.NewServiceUnavailable("the API server is restarting"), true},
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"403", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "run", errors.New("RBAC")), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cs := fake.NewClientset()
			cs.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
				w := watch.NewFake()
				w.Stop() // dropped at once: Wait reads the Pod again
				return true, w, nil
			})
			var gets atomic.Int32
			cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "" {
					// The log follower Wait starts on a running container reads pods/log at
					// its own pace: only Wait's reads of the Pod count.
					return false, nil, nil
				}
				switch gets.Add(1) {
				case 1:
					return true, pod(running), nil
				case 2:
					return true, nil, c.second
				}
				return true, pod(done), nil
			})
			rt := kubernetes.New(cs, kubernetes.Options{Namespace: "alfred"})
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			st, err := rt.Wait(ctx, "run")
			if !c.ok {
				require.True(t, apierrors.IsForbidden(err), "%v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, 0, st.Code)
		})
	}
}

// TestDestroyOfAPodThatNeverGoesIsBounded: a Pod on a node that is gone stays Terminating
// until someone forces its deletion. Destroy (and the start-up sweeps that call it) waits
// CleanupTimeout for it to go, then says so, instead of blocking for ever.
func TestDestroyOfAPodThatNeverGoesIsBounded(t *testing.T) {
	t.Parallel()
	now := metav1.Now()
	stuck := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "run", Namespace: "alfred", DeletionTimestamp: &now},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	cs := fake.NewClientset(stuck)
	cs.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil // accepted; the kubelet that would finish it is gone
	})
	rt := kubernetes.New(cs, kubernetes.Options{Namespace: "alfred"})
	rt.CleanupTimeout = 300 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- rt.Destroy(context.Background(), "run") }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "wait for pod run to go")
	case <-time.After(time.Minute):
		t.Fatal("Destroy still waits for a Pod that never goes")
	}
}

// TestStartWaitsOutATransientPull: a registry that answers 429 (or times out) is tried again by
// the kubelet, so the run waits within its start's bound; a registry that says the image is
// not there fails at once.
func TestStartWaitsOutATransientPull(t *testing.T) {
	t.Parallel()
	waiting := func(name, reason, msg string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "alfred"}, Status: corev1.PodStatus{
			Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: kubernetes.ContainerName,
				Image: "registry.example/alfred/agent:1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	cs := fake.NewClientset(
		waiting("rate-limited", "ErrImagePull", `failed to pull and unpack image: unexpected status from HEAD request: 429 Too Many Requests`),
		waiting("backing-off", "ImagePullBackOff", `Back-off pulling image "registry.example/alfred/agent:1": dial tcp: i/o timeout`),
		waiting("absent", "ErrImagePull", `failed to resolve reference "registry.example/alfred/agent:1": registry.example/alfred/agent:1: not found`),
		waiting("denied", "ImagePullBackOff", `pull access denied, repository does not exist or may require authorization`),
	)
	rt := kubernetes.New(cs, kubernetes.Options{Namespace: "alfred"})
	for _, name := range []string{"rate-limited", "backing-off"} {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		_, err := rt.Wait(ctx, runner.ContainerID(name))
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "%s: still waiting for the kubelet's next pull", name)
	}
	for _, name := range []string{"absent", "denied"} {
		_, err := rt.Wait(t.Context(), runner.ContainerID(name))
		require.ErrorIs(t, err, runner.ErrImageNotFound, name)
	}
}
