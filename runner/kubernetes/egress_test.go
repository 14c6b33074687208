package kubernetes_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// TestNetworkPolicyFor: an allowlist compiles to DNS plus one ipBlock and TCP port per address
// entry (an IPv6 one a /128, a repeat once), no ingress; names are handed back, in order, since
// a NetworkPolicy holds no names; a bad entry is an error.
func TestNetworkPolicyFor(t *testing.T) {
	sel := map[string]string{runner.LabelManaged: "true"}
	np, names, err := kubernetes.NetworkPolicyFor("alfred-runs-egress", "runs", sel,
		[]string{"api.example:443", "192.0.2.7:8080", "[2001:db8::1]:443", "*.example.org:443", "192.0.2.7:8080"})
	require.NoError(t, err)
	require.Equal(t, []string{"api.example:443", "*.example.org:443"}, names)
	require.Equal(t, "runs", np.Namespace)
	require.Equal(t, sel, np.Spec.PodSelector.MatchLabels)
	require.NotNil(t, np.Spec.Ingress)
	require.Empty(t, np.Spec.Ingress)
	require.Len(t, np.Spec.Egress, 3)
	require.Equal(t, "kube-dns", np.Spec.Egress[0].To[0].PodSelector.MatchLabels["k8s-app"])
	require.Equal(t, "192.0.2.7/32", np.Spec.Egress[1].To[0].IPBlock.CIDR)
	require.Equal(t, int32(8080), np.Spec.Egress[1].Ports[0].Port.IntVal)
	require.Equal(t, corev1.ProtocolTCP, *np.Spec.Egress[1].Ports[0].Protocol)
	require.Equal(t, "2001:db8::1/128", np.Spec.Egress[2].To[0].IPBlock.CIDR)

	_, _, err = kubernetes.NetworkPolicyFor("p", "runs", sel, []string{"192.0.2.7", "192.0.2.7:0"})
	require.ErrorContains(t, err, `"192.0.2.7"`)
	require.ErrorContains(t, err, `"192.0.2.7:0"`)
}

// TestEgressPolicyEnforced: on the test cluster, whose NetworkPolicy firewall is kube-router
// (scripts/test-cluster.sh), a run's Pod under the NetworkPolicy its allowlist compiles to gets
// an answer from the server on the list and is refused by the one off it, both test servers on
// this machine's node address. The probe waits (bounded) for a refusal first, since the policy
// reaches the node after the container starts; without enforcement it never comes and the
// probe reports the off-list server "connected".
func TestEgressPolicyEnforced(t *testing.T) {
	t.Parallel()
	cs, ns := cluster(t)
	host := kubetest.NodeAddress(t, cs)
	var onHits, offHits atomic.Int32
	serve := func(hits *atomic.Int32) string {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		require.NoError(t, err)
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
		}))
		srv.Listener.Close()
		srv.Listener = ln
		srv.Start()
		t.Cleanup(srv.Close)
		return ln.Addr().String()
	}
	on, off := serve(&onHits), serve(&offHits)

	np, names, err := kubernetes.NetworkPolicyFor("alfred-runs-egress", ns, map[string]string{runner.LabelManaged: "true"},
		[]string{"api.example:443", on})
	require.NoError(t, err)
	require.Equal(t, []string{"api.example:443"}, names)
	_, err = cs.NetworkingV1().NetworkPolicies(ns).Create(t.Context(), np, metav1.CreateOptions{})
	require.NoError(t, err)

	rt := kubernetes.New(cs, testOptions(ns))
	spec := runner.ContainerSpec{Name: "alfred-egress-" + kubetest.RandomHex(t, 4), Image: probeImage(t),
		Cmd: []string{"egress", on, off}, User: runtimetest.ImageUser,
		Labels: map[string]string{runner.LabelManaged: "true"}}
	h, err := rt.Start(t.Context(), spec)
	require.NoError(t, err)
	t.Cleanup(func() { _ = rt.Destroy(t.Context(), h.ID) })
	st, err := rt.Wait(t.Context(), h.ID)
	require.NoError(t, err)
	stdout, stderr, err := rt.Logs(t.Context(), h.ID)
	require.NoError(t, err)
	out := string(stdout) + string(stderr)
	require.Equal(t, 0, st.Code, out)
	require.Contains(t, out, "on "+on+": 200 OK", out)
	require.Contains(t, out, "off "+off+": refused", out)
	require.NotContains(t, out, "connected", out)
	require.Positive(t, onHits.Load())
	require.Zero(t, offHits.Load(), "the off-list server answered a request")
}
