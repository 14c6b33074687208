package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
)

// onceRuntime is the container runtime of a cell of the kill -9 matrix as the test sees it.
type onceRuntime interface {
	// prepare makes image available and returns the runner section of the configuration of
	// the Alfred whose data_dir is dataDir.
	prepare(t *testing.T, image, dataDir string) string
	// env is what `alfred serve` gets in its environment to reach the runtime through the
	// test's proxy.
	env() []string
	// armCreated makes the proxy hold the process at created-and-not-started of the next
	// development container; holder is that proxy.
	armCreated(t *testing.T)
	holder() *holdProxy
	// checkCreated checks, with the process killed, the container named name the held
	// moment left.
	checkCreated(t *testing.T, name string)
	// createdRuns tells whether a container created and not started runs all the same (a
	// Pod, started by the kubelet) and is reattached, rather than never started and run again.
	createdRuns() bool
	// devRunning, state: as crashRuntime's.
	devRunning(t *testing.T, instance string) []string
	state(t *testing.T, id string) (running bool, exit int)
	// startedDev is how many development containers were started for the Alfred of dataDir.
	startedDev(t *testing.T, dataDir string) int
	// leftovers checks that nothing of the Alfred of dataDir is left.
	leftovers(t *testing.T, dataDir string)
}

// dockerOnce is onceRuntime on the Docker Engine, reached through a dockerProxy.
type dockerOnce struct {
	*dockerCrash
	proxy *dockerProxy
}

func newDockerOnce(t *testing.T) *dockerOnce {
	return &dockerOnce{dockerCrash: newDockerCrash(t), proxy: newDockerProxy(t)}
}

func (d *dockerOnce) env() []string { return []string{"DOCKER_HOST=unix://" + d.proxy.sock} }

// armCreated holds the start request of the development container: it is created, never
// started.
func (d *dockerOnce) armCreated(*testing.T) {
	d.proxy.arm(func(r *http.Request) bool {
		m := dockerStartPath.FindStringSubmatch(r.URL.Path)
		return r.Method == http.MethodPost && m != nil && d.proxy.phaseOf(m[1]) == "development"
	})
}

func (d *dockerOnce) holder() *holdProxy { return d.proxy.holdProxy }

func (d *dockerOnce) checkCreated(t *testing.T, name string) {
	info, err := d.cli.ContainerInspect(context.Background(), name)
	require.NoError(t, err)
	require.Equal(t, "created", info.State.Status, "the container was created and never started")
}

func (d *dockerOnce) createdRuns() bool { return false }

func (d *dockerOnce) startedDev(*testing.T, string) int { return d.proxy.startedOf("development") }

func (d *dockerOnce) leftovers(t *testing.T, dataDir string) { requireNoLeftovers(t, dataDir) }

// kubeOnce is onceRuntime on a namespace of the test cluster, the API server reached through a
// holdProxy that adds the test's credentials (as kubectl proxy does).
type kubeOnce struct {
	*kubeCrash
	proxy *holdProxy
}

// newKubeOnce skips the test without the test cluster (fails it under CI).
func newKubeOnce(t *testing.T) *kubeOnce {
	k := newKubeCrash(t)
	cfg, err := clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	require.NoError(t, err)
	tr, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	u, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = tr
	p := newHoldProxy(rp)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	t.Cleanup(p.release)
	path := filepath.Join(t.TempDir(), "proxy.kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q}}]
users: [{name: proxy, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: proxy}}]
current-context: proxy
`, srv.URL)), 0o600))
	k.kubeconfig = path // the runner section names the proxy
	return &kubeOnce{kubeCrash: k, proxy: p}
}

func (k *kubeOnce) env() []string { return nil }

// prepare is kubeCrash's without the image's import, which killMatrix makes once for all cells.
func (k *kubeOnce) prepare(t *testing.T, _, dataDir string) string {
	claim := kubetest.StateClaim(t, k.cs, k.ns, dataDir)
	return fmt.Sprintf(`runner:
  memory_bytes: 268435456
  runtime: kubernetes
  egress: {mode: open}  # not this test's subject: runner/redteam_egress_kubernetes_test.go
  kubernetes: {kubeconfig: %s, namespace: %s, state_claim: %s, pull_policy: Never, requests: {cpu: 50m, memory: 64Mi}}
`, k.kubeconfig, k.ns, claim)
}

// armCreated holds the update that makes the new development Pod the owner of its Secret,
// the runtime's next call after the Pod's create.
func (k *kubeOnce) armCreated(*testing.T) {
	k.proxy.arm(func(r *http.Request) bool {
		return r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/namespaces/"+k.ns+"/secrets/") &&
			strings.Contains(r.URL.Path, "development")
	})
}

func (k *kubeOnce) holder() *holdProxy { return k.proxy }

func (k *kubeOnce) checkCreated(t *testing.T, name string) {
	_, err := k.cs.CoreV1().Pods(k.ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err, "the Pod was created")
}

func (k *kubeOnce) createdRuns() bool { return true }

func (k *kubeOnce) startedDev(_ *testing.T, dataDir string) int {
	return len(k.rec.Pods(map[string]string{runner.LabelManaged: "true", runner.LabelPhase: "development",
		runner.LabelInstance: runner.InstanceID(dataDir)}))
}

func (k *kubeOnce) leftovers(t *testing.T, dataDir string) {
	require.Eventually(t, func() bool {
		s, err := k.cs.CoreV1().Secrets(k.ns).List(context.Background(), metav1.ListOptions{LabelSelector: runner.LabelManaged + "=true"})
		require.NoError(t, err)
		return len(s.Items) == 0
	}, time.Minute, 100*time.Millisecond, "a run's Secret was left behind")
	requireNoKubeLeftovers(t, k.cs, k.ns, dataDir)
}
