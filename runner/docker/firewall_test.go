package docker_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/client"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/docker"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// firewallRace is the error Docker 20.10 (iptables-nft) answered a network creation with when
// another network changed at the same moment, as seen in a test run.
const firewallRace = `unable to remove jump to DOCKER-ISOLATION-STAGE-1 rule in FORWARD chain:  ` +
	`(iptables failed: iptables --wait -D FORWARD -j DOCKER-ISOLATION-STAGE-1: iptables v1.8.9 (nf_tables):  ` +
	`RULE_DELETE failed (No such file or directory): rule in chain FORWARD\n (exit status 4))`

var networkCreatePath = regexp.MustCompile(`^(/v[0-9.]+)?/networks/create$`)

// faultyEngine is the real Docker engine behind a proxy that answers the first fail network
// creations with the daemon's firewall race (500), as the engine does; it returns a client of
// it and the count of creations it failed.
func faultyEngine(t *testing.T, fail int64) (*client.Client, *atomic.Int64) {
	t.Helper()
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		u, err := url.Parse(h)
		require.NoError(t, err)
		require.Equal(t, "unix", u.Scheme, "the proxy reaches the engine on its unix socket")
		sock = u.Path
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}},
	}
	var failed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && networkCreatePath.MatchString(r.URL.Path) && failed.Load() < fail {
			failed.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, `{"message":%q}`+"\n", firewallRace)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cli, err := client.NewClientWithOpts(client.WithHost("tcp://"+srv.Listener.Addr().String()), client.WithAPIVersionNegotiation())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli, &failed
}

// TestEgressNetworkCreatedAgainAfterTheFirewallRace: a run with an egress allowlist starts
// although the engine failed its network's creation on its own firewall race (twice); an
// engine that keeps failing fails the start after a bounded number of attempts, with its
// error.
func TestEgressNetworkCreatedAgainAfterTheFirewallRace(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	image := runtimetest.BuildImage(t, ctx, runtimetest.Client(t), fmt.Sprintf("alfred-test/probe:firewall-%d", os.Getpid()), runtimetest.ProbePackage)
	spec := func(name string) runner.ContainerSpec {
		return runner.ContainerSpec{Name: name, Image: image, Cmd: []string{"sleep", "60"}, WorkingDir: "/",
			User: runtimetest.ImageUser, Limits: runner.Limits{MemoryBytes: 64 << 20, PIDs: 32},
			Labels: map[string]string{runner.LabelManaged: "true", runner.LabelRun: name, "alfred.test.firewall": "1"},
			Egress: &runner.Egress{Allow: []string{"127.0.0.1:9"}}}
	}

	cli, failed := faultyEngine(t, 2)
	rt := docker.New(cli)
	name := fmt.Sprintf("alfred-firewall-%d", os.Getpid())
	h, err := rt.Start(ctx, spec(name))
	require.NoError(t, err, "the network is created again after the daemon's race")
	t.Cleanup(func() { require.NoError(t, rt.Destroy(context.Background(), h.ID)) })
	require.EqualValues(t, 2, failed.Load())
	adopted, err := rt.Adopt(ctx, name)
	require.NoError(t, err)
	require.True(t, adopted.Running)

	cli, failed = faultyEngine(t, 1000)
	_, err = docker.New(cli).Start(ctx, spec(name+"-never"))
	require.ErrorContains(t, err, "iptables failed", "an engine that keeps failing: its error")
	require.EqualValues(t, 5, failed.Load(), "a bounded number of attempts")
}
