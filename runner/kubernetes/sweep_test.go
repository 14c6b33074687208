package kubernetes_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// TestSweepLeftoversRemovesOrphanedSecrets: on the test cluster, a run's Secret created without
// its Pod (Alfred stopped between the two creations) is removed by the sweep once it is old
// enough; the Secret of a live run (its Pod running), a young orphan (another replica's Start
// may be between its two creations) and a Secret without the installation's labels stay.
func TestSweepLeftoversRemovesOrphanedSecrets(t *testing.T) {
	t.Parallel()
	cs, ns := cluster(t)
	ctx := t.Context()
	want := map[string]string{runner.LabelManaged: "true", runner.LabelInstance: "sweep" + kubetest.RandomHex(t, 3)}
	secret := func(name string, labels map[string]string) {
		_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Data:       map[string][]byte{"API_KEY": []byte("sk-test-not-a-secret")}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	secret("alfred-orphan", want)
	secret("someone-elses", map[string]string{runner.LabelManaged: "true", runner.LabelInstance: "another"})

	rt := kubernetes.New(cs, testOptions(ns))
	live := runner.ContainerSpec{Name: "alfred-live", Image: probeImage(t), Cmd: []string{"sleep", "120"},
		User: runtimetest.ImageUser, Env: []string{"API_KEY=sk-test-not-a-secret"}, Labels: want}
	h, err := rt.Start(ctx, live)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Destroy(t.Context(), h.ID) })

	// The default age keeps an orphan created a moment ago.
	removed, err := rt.SweepLeftovers(ctx, want)
	require.NoError(t, err)
	require.Empty(t, removed)

	rt.OrphanSecretAge = -1
	removed, err = rt.SweepLeftovers(ctx, want)
	require.NoError(t, err)
	require.Equal(t, []string{"alfred-orphan"}, removed)
	_, err = cs.CoreV1().Secrets(ns).Get(ctx, "alfred-orphan", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the orphan is still there: %v", err)
	for _, name := range []string{"alfred-live", "someone-elses"} {
		_, err = cs.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err, name)
	}
}
