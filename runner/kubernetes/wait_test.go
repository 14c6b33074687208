package kubernetes_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

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
