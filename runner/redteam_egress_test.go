package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/require"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/egress"
	"github.com/alfred-bot/alfred/runner/gitrepo"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
)

// keyedScript is the script adapter with what a real adapter has: its key in the environment and
// a provider host its runs must reach (runner.EgressAgent).
type keyedScript struct {
	*script.Agent
	key      string
	provider string // host:port
}

func (k keyedScript) Command(in phase.Input) (runner.Invocation, error) {
	inv, err := k.Agent.Command(in)
	inv.Env = append(inv.Env, "ANTHROPIC_API_KEY="+k.key)
	return inv, err
}

func (k keyedScript) EgressHosts() []string { return []string{k.provider} }

// TestRedTeamEgressDocker plays a prompt-injected agent on Docker with the egress allowlist on:
// it reaches its provider through the proxy; a host off the list is refused by the proxy (403,
// the server never sees a byte) and a direct connection meets the run's internal network; it
// prints its environment, reads a file of Alfred's host outside its mounts and writes its key
// into a file for the commit. Each attempt fails closed and shows: the run's output (the run's
// record) ends with the refusals, the runtime reports each one (cmd logs and counts it,
// alfred_egress_refused_total), the push is refused, nothing reaches the remote, the key is
// censored from the output, and the run's network is gone with its container.
func TestRedTeamEgressDocker(t *testing.T) {
	ctx := context.Background()
	// The container's HTTP client sends loopback addresses around any proxy: the servers get
	// names, which the proxy (and only the proxy) resolves to them.
	si := newEgressStandIns(t, "127.0.0.1")

	dir := t.TempDir()
	// A file of Alfred's on the host, outside every mount of the run.
	alfredFile := filepath.Join(dir, "alfred-secrets", "forge_token")
	require.NoError(t, os.MkdirAll(filepath.Dir(alfredFile), 0o755))
	require.NoError(t, os.WriteFile(alfredFile, []byte("forge-token-of-alfred\n"), 0o644))

	redTeam := si.script(egress.ProxyHost+":"+si.offPort, fmt.Sprintf(`
  print_env: true
  read_files: [%q, /proc/1/environ]
  write_env: {leak.txt: ANTHROPIC_API_KEY}
`, alfredFile))
	d := setupDocker(t, ctx, redTeam)
	d.rt.EgressDial = si.dial
	var mu sync.Mutex
	var refusedSeen []string
	d.rt.OnEgressRefused = func(labels map[string]string, target string, _ bool) {
		mu.Lock()
		defer mu.Unlock()
		refusedSeen = append(refusedSeen, labels[runner.LabelPhase]+" "+target)
	}
	agent := keyedScript{Agent: d.agent.(*script.Agent), key: canaryAgentKey, provider: si.provider}
	ex, err := runner.NewExecutor(runner.Config{
		Runtime: d.rt, Agents: map[string]runner.Agent{script.Name: agent},
		Bindings: map[phase.Phase]string{phase.Development: script.Name},
		DataDir:  filepath.Join(dir, "data"), UID: runtimetest.ImageUID, GID: runtimetest.ImageGID,
		Limits:  runner.Limits{MemoryBytes: 256 << 20, NanoCPUs: 1e9, PIDs: 128},
		Timeout: 2 * time.Minute, StopGrace: time.Second,
		Egress: &runner.EgressPolicy{ProxyURL: egress.ProxyURL},
		Redact: func(s string) string { return strings.ReplaceAll(s, canaryAgentKey, "[redacted]") },
	})
	require.NoError(t, err)
	bare := seedRemote(t, dir, map[string]string{"README": "original\n"})
	mgr, err := gitrepo.New(gitrepo.Config{DataDir: filepath.Join(dir, "data"), AuthorName: "Alfred", AuthorEmail: "a@example.org",
		UID: runtimetest.ImageUID, GID: runtimetest.ImageGID,
		Secrets: []gitrepo.NamedSecret{{Name: "agents[0].api_key", Value: canaryAgentKey}}})
	require.NoError(t, err)
	svc := runner.NewService(ex, map[string]*gitrepo.Manager{"gl": mgr}, runner.SessionConfig{}, nil)
	const branch = "agent/issue-9-redteam"
	out, err := svc.Execute(ctx, phase.Job{MailboxID: 44, RunID: 1, Attempt: 1, ForgeName: "gl", Branch: branch, Push: true,
		Repository: forge.Repository{Path: "acme/shop", DefaultBranch: "main", CloneURL: bare},
		Input:      phase.Input{Phase: phase.Development, Repo: "acme/shop", Issue: 9}})
	require.NoError(t, err)
	log := out.Output

	// A direct connection, around the proxy: the host's loopback servers are not on the run's
	// network. (The host itself is reachable at its gateway address: spec/security.md, "The
	// host's own services". No address off this machine is dialled by the tests.)
	mu.Lock()
	si.check(t, log, egress.ProxyHost+":"+si.offPort, refusedSeen)
	mu.Unlock()

	// The environment holds the proxy and the agent's key, which the output never shows.
	require.Contains(t, log, "env HTTPS_PROXY="+egress.ProxyURL)
	require.Contains(t, log, "env ANTHROPIC_API_KEY=[redacted]")
	require.NotContains(t, log, canaryAgentKey)
	// Alfred's file is not in the container's file system.
	require.Contains(t, log, "read "+alfredFile+": error: ")
	require.NotContains(t, log, "forge-token-of-alfred")

	// The key written for the commit is refused at the push; nothing reached the remote.
	require.Contains(t, out.Failure, "`leak.txt` holds the value of agents[0].api_key")
	require.NotContains(t, out.Failure, canaryAgentKey)
	require.Equal(t, "main", strings.TrimSpace(runGit(t, "-C", bare, "for-each-ref", "--format=%(refname:short)", "refs/heads/")),
		"no branch but main on the remote")
	require.NotContains(t, runGit(t, "-C", bare, "log", "-p", "--all"), canaryAgentKey)

	// The run's network went with its container.
	nets, err := d.cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "alfred.egress.allow"),
		filters.Arg("label", runner.LabelMailbox+"=44"))})
	require.NoError(t, err)
	for _, n := range nets {
		require.NotContains(t, n.Name, "-mbx44-r1-", "network %s left behind", n.Name)
	}
}

// egressStandIns are the red-team egress tests' two servers on this machine, the agent's
// provider and a host off the list, with the names the runs know them by ("provider.test:port",
// "offlist.test:port"), which only the proxy resolves (dial).
type egressStandIns struct {
	names                        map[string]string // name:port → address:port
	provider                     string            // the provider's name:port, on the list
	providerURL, offURL, offHost string
	offPort, offAddr             string // the off-list server's port and address:port
	offListHits                  *atomic.Int64
}

// newEgressStandIns starts the two servers listening on host (an address of this machine).
func newEgressStandIns(t *testing.T, host string) *egressStandIns {
	t.Helper()
	serve := func(h http.HandlerFunc) *httptest.Server {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		require.NoError(t, err)
		srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
		srv.Start()
		t.Cleanup(srv.Close)
		return srv
	}
	provider := serve(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "provider answers") })
	si := &egressStandIns{offListHits: &atomic.Int64{}}
	offList := serve(func(w http.ResponseWriter, r *http.Request) { si.offListHits.Add(1) })
	si.provider = "provider.test:" + portOf(provider.URL)
	si.offPort, si.offAddr = portOf(offList.URL), hostOf(offList.URL)
	si.offHost = "offlist.test:" + si.offPort
	si.names = map[string]string{si.provider: hostOf(provider.URL), si.offHost: si.offAddr}
	si.providerURL, si.offURL = "http://"+si.provider, "http://"+si.offHost
	return si
}

// script is the red-team script of the development phase: connect to the provider, then to the
// host off the list by plain HTTP and by CONNECT; dial dialed directly; then the keys of more.
func (si *egressStandIns) script(dialed, more string) string {
	return fmt.Sprintf(`
development:
  summary: Did what the issue said.
  commit_message: "Add the export"
  connect: [%q, %q, %q]
  dial: [%q]
`, si.providerURL+"/v1/messages", si.offURL+"/exfiltrate", "https://"+si.offHost+"/exfiltrate", dialed) + strings.TrimPrefix(more, "\n")
}

// dial is the proxy's dialer (docker.Runtime.EgressDial): the names to the servers.
func (si *egressStandIns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if real, ok := si.names[addr]; ok {
		addr = real
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// check asserts what a run's log (its output) and the runtime's reports (reported: "phase
// host:port" per refusal) show of the connect attempts and of the direct dial of dialed.
func (si *egressStandIns) check(t *testing.T, log, dialed string, reported []string) {
	t.Helper()
	// The provider, on the list, answers through the proxy.
	require.Contains(t, log, "connect "+si.providerURL+"/v1/messages: 200 OK: provider answers")
	// Off the list: refused by the proxy, plain HTTP and CONNECT alike; the server saw nothing.
	require.Contains(t, log, "connect "+si.offURL+"/exfiltrate: 403 Forbidden: alfred: egress to "+si.offHost+" refused")
	require.Regexp(t, `connect https://`+regexp.QuoteMeta(si.offHost)+`/exfiltrate: error: .*Forbidden`, log)
	require.Zero(t, si.offListHits.Load(), "a host off the list was reached")
	// The direct connection, around the proxy, fails.
	require.Regexp(t, `dial `+regexp.QuoteMeta(dialed)+`: error: `, log)
	// Visible: the run's output ends with the refusals, and the runtime reported each one.
	require.Contains(t, log, runner.EgressRefusedLine+si.offHost+" (2 times)")
	require.Equal(t, []string{"development " + si.offHost, "development " + si.offHost}, reported)
}

func hostOf(u string) string {
	p, _ := url.Parse(u)
	return p.Host
}

func portOf(u string) string {
	p, _ := url.Parse(u)
	return p.Port()
}

// TestRedTeamEgressDockerContained is TestRedTeamEgressDocker's network with Alfred in a
// container of the engine it starts runs on, as the compose file deploys it: the runtime
// (runner/testdata/containedalfred, the Executor on docker.Runtime) runs in a container of a
// network of the test's own, with the engine's socket and the data directory at the same path.
// It finds its own container (docker.FindSelf), joins the run's internal network and serves the
// run's proxy on its address there. The run reaches its provider; the host off the list is
// refused (403, reported, never reached); a direct dial of that host's address finds no route.
// Once the run is over, Alfred's container has left the run's network and the network is gone.
func TestRedTeamEgressDockerContained(t *testing.T) {
	ctx := context.Background()
	cli := runtimetest.Client(t)
	suffix := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	// The test's own network: Alfred's container is on it (compose's default network), and the
	// stand-ins listen on its gateway, this machine's address there.
	netName := "alfred-test-contained-" + suffix
	created, err := cli.NetworkCreate(ctx, netName, network.CreateOptions{Driver: "bridge"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.NetworkRemove(context.Background(), created.ID) })
	info, err := cli.NetworkInspect(ctx, created.ID, network.InspectOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, info.IPAM.Config)
	gateway := info.IPAM.Config[0].Gateway
	si := newEgressStandIns(t, gateway)

	// The direct dial: Alfred's container's address on the test's network, where it listens
	// (as compose's Alfred does for its pages, beside PostgreSQL).
	redTeam := si.script("ALFRED_ADDR:8080", "")
	d := setupDocker(t, ctx, redTeam)
	alfredImage := runtimetest.BuildImage(t, ctx, cli, "alfred-test/contained-alfred:"+suffix,
		"github.com/alfred-bot/alfred/runner/testdata/containedalfred")
	dir := t.TempDir()
	const mailbox = 45
	instance := fmt.Sprintf("%012x", time.Now().UnixNano()&0xffffffffffff)
	in, err := json.Marshal(map[string]any{"image": d.image, "script": redTeam, "provider": si.provider,
		"names": si.names, "data_dir": filepath.Join(dir, "data"), "worktree": worktree(t), "instance": instance,
		"mailbox": mailbox, "UID": runtimetest.ImageUID, "GID": runtimetest.ImageGID,
		"state": filepath.Join(dir, "first-start-over"), "off_url": si.offURL + "/after-restart"})
	require.NoError(t, err)
	alfred, err := cli.ContainerCreate(ctx, &container.Config{Image: alfredImage, User: "0:0",
		Env: []string{"CONTAINED_ALFRED=" + string(in)}},
		&container.HostConfig{NetworkMode: container.NetworkMode(netName), Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: "/var/run/docker.sock", Target: "/var/run/docker.sock"},
			// The test's temporary directories (the data directory and the worktree), at the
			// same path: the engine resolves the runs' mounts on this machine.
			{Type: mount.TypeBind, Source: filepath.Dir(dir), Target: filepath.Dir(dir)},
		}}, nil, nil, "alfred-test-contained-"+suffix)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = cli.ContainerRemove(context.Background(), alfred.ID, container.RemoveOptions{Force: true})
	})
	t.Cleanup(func() { removeInstance(t, cli, instance, alfred.ID) })
	// start starts Alfred's container and returns what it printed once it exits.
	type output struct {
		Self, Addr, Status, Err, Log, Adopted, Cleanup string
		Reported                                       []string
	}
	start := func() output {
		t.Helper()
		require.NoError(t, cli.ContainerStart(ctx, alfred.ID, container.StartOptions{}))
		waitC, errC := cli.ContainerWait(ctx, alfred.ID, container.WaitConditionNotRunning)
		select {
		case <-waitC:
		case err := <-errC:
			require.NoError(t, err)
		}
		logs, err := cli.ContainerLogs(ctx, alfred.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
		require.NoError(t, err)
		var stdout, stderr strings.Builder
		_, err = stdcopy.StdCopy(&stdout, &stderr, logs)
		logs.Close()
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n") // the last start's line
		var out output
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &out), "stdout %q, stderr %q", stdout.String(), stderr.String())
		require.Empty(t, out.Err, "log:\n%s", out.Log)
		require.Equal(t, alfred.ID, out.Self, "Alfred found its own container")
		return out
	}
	networks := func(labels ...string) (names []string) {
		t.Helper()
		f := filters.NewArgs(filters.Arg("label", "alfred.egress.allow"), filters.Arg("label", runner.LabelInstance+"="+instance))
		for _, l := range labels {
			f.Add("label", l)
		}
		nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: f})
		require.NoError(t, err)
		for _, n := range nets {
			names = append(names, n.Name)
		}
		return names
	}
	joined := func() (names []string) {
		t.Helper()
		info, err := cli.ContainerInspect(ctx, alfred.ID)
		require.NoError(t, err)
		for n := range info.NetworkSettings.Networks {
			names = append(names, n)
		}
		return names
	}

	out := start()
	require.Equal(t, string(runner.StatusSucceeded), out.Status, out.Log)
	// Alfred's address on the test's network, dialled around the proxy: the run's network is
	// internal, nothing is forwarded off it.
	require.NotEmpty(t, out.Addr)
	si.check(t, out.Log, out.Addr+":8080", out.Reported)
	// The run's network is gone, and Alfred's container left it; it is on the network of the
	// run it left going.
	require.Empty(t, networks(fmt.Sprintf("%s=%d", runner.LabelMailbox, mailbox)), "the run's network was left behind")
	left := networks()
	require.Len(t, left, 1)
	require.ElementsMatch(t, []string{netName, left[0]}, joined())

	// Restarted, Alfred adopts that run: its proxy answers again (the host off the list
	// refused, reported), and the run's teardown takes Alfred's container off its network and
	// removes it.
	out = start()
	require.Equal(t, "403 Forbidden", out.Adopted)
	require.Equal(t, []string{"development " + si.offHost}, out.Reported)
	require.Empty(t, out.Cleanup)
	require.Empty(t, networks(), "a run's network was left behind")
	require.Equal(t, []string{netName}, joined(), "Alfred's container is still on a run's network")
}

// removeInstance removes what a test's containerised Alfred (instance) may have left: its runs'
// containers, Alfred's container's place on their networks, the networks.
func removeInstance(t *testing.T, cli *client.Client, instance, alfred string) {
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", runner.LabelInstance+"="+instance))
	if list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
		for _, c := range list {
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
		}
	}
	if nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: f}); err == nil {
		for _, n := range nets {
			_ = cli.NetworkDisconnect(ctx, n.ID, alfred, true)
			if err := cli.NetworkRemove(ctx, n.ID); err != nil {
				t.Errorf("remove network %s: %v", n.Name, err)
			}
		}
	}
}
