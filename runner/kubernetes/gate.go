package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// GateContainerName is the name of the init container of a confined run's Pod (EgressGate).
const GateContainerName = "egress-gate"

// DefaultGateTimeout bounds the gate's wait when EgressGate.Timeout is zero: well under
// DefaultStartTimeout, so that an unfiltered Pod fails with the gate's reason, not Start's.
const DefaultGateTimeout = 60 * time.Second

// GateSubcommand is the subcommand of the alfred binary the gate runs ("alfred egress-gate
// -target host:port -timeout 60s": the image's entrypoint is alfred, as deploy/Dockerfile
// builds it).
const GateSubcommand = "egress-gate"

// EgressGate closes the first instants of a run: a NetworkPolicy is enforced by the node's
// firewall (kube-router, Calico, Cilium, ...), which installs a new Pod's rules a moment after
// the Pod's network exists, so a container started at once could connect anywhere until then.
// A Pod whose spec has an egress allowlist (runner.ContainerSpec.Egress) therefore gets an init
// container, GateContainerName, that runs WaitFiltered: it dials Target until a connection
// fails (refused, unreachable or timed out: the policy holds the Pod), then exits 0, and only
// then does the kubelet start the agent's container, in the same network namespace and under
// the same policy. Until Timeout it exits 1 with the reason, the Pod fails, and so does the run
// (Start's error names the gate): fail closed. The init container is hardened as the agent's
// (the runs' uid, read-only root, no capability), so Pod Security restricted admits it.
type EgressGate struct {
	// Image holds the alfred binary as its entrypoint: Alfred's own image
	// (runner.kubernetes.egress_gate_image).
	Image string
	// Target is the host:port the gate dials: an address off the allowlist that a Pod reaches
	// while nothing filters it. Empty: the cluster's API server, as the kubelet gives it to
	// every container (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, even without
	// service links): every Pod reaches it unless a policy stops it, and it is never on the
	// runs' allowlist (if the operator lists it, every gate times out: the runs fail, closed).
	Target string
	// Timeout bounds the wait (DefaultGateTimeout if zero).
	Timeout time.Duration
}

// ErrEgressOpen is returned by WaitFiltered when the target still answered at the bound.
var ErrEgressOpen = errors.New("egress not filtered")

// Gate timing: how long one connection attempt may take, the pause between attempts, and how
// many failures in a row mean "filtered" (one failure could be the target's own hiccup).
const (
	gateDialTimeout = time.Second
	gateInterval    = 100 * time.Millisecond
	gateFailures    = 2
)

// WaitFiltered dials target (host:port; empty: the API server of KUBERNETES_SERVICE_HOST and
// KUBERNETES_SERVICE_PORT) until gateFailures attempts in a row fail, which means the Pod's
// egress is filtered, and returns how many connections succeeded before. The gate of
// EgressGate.
//
// Errors: no target; the bound timeout passed without gateFailures failures in a row (wraps
// ErrEgressOpen, with the count: the NetworkPolicy is not enforced on this Pod, or the target
// is on the allowlist); ctx ended.
func WaitFiltered(ctx context.Context, target string, timeout time.Duration) (int, error) {
	if target == "" {
		host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
		if host == "" || port == "" {
			return 0, errors.New("egress gate: no target, and no KUBERNETES_SERVICE_HOST/PORT in the environment")
		}
		target = net.JoinHostPort(host, port)
	}
	if _, p, err := net.SplitHostPort(target); err != nil || p == "" {
		return 0, fmt.Errorf("egress gate: target %q: want host:port", target)
	}
	if timeout <= 0 {
		timeout = DefaultGateTimeout
	}
	// Each attempt has its own timeout, never cut by the bound: an attempt the bound
	// interrupted would count as a failure, and the gate would pass open (fail closed instead).
	bound := time.Now().Add(timeout)
	connected, failed := 0, 0
	var d net.Dialer
	for time.Now().Before(bound) {
		dctx, cancel := context.WithTimeout(ctx, gateDialTimeout)
		c, err := d.DialContext(dctx, "tcp", target)
		cancel()
		if ctx.Err() != nil {
			if c != nil {
				c.Close()
			}
			return connected, fmt.Errorf("egress gate: %w", ctx.Err())
		}
		if err != nil {
			if failed++; failed >= gateFailures {
				return connected, nil
			}
			continue
		}
		c.Close()
		connected++
		failed = 0
		select {
		case <-ctx.Done():
		case <-time.After(gateInterval):
		}
	}
	return connected, fmt.Errorf("egress gate: %w after %s: %d connections to %s (off the runs' allowlist) succeeded and no two attempts in a row failed: "+
		"the runs' NetworkPolicy is not enforced on this Pod (does the cluster's network plugin implement NetworkPolicy? "+
		"is Alfred's policy alfred-runs-egress-* in the namespace?), or the target is on the allowlist; the run does not start",
		ErrEgressOpen, timeout, connected, target)
}

// gateContainer is the init container of EgressGate g: the run's image pull policy and
// security context, small fixed resources (an init container's requests do not add to the
// Pod's: the larger of the two counts), and its stderr as the termination message, which
// Start reports when the gate fails.
func gateContainer(g *EgressGate, pull corev1.PullPolicy, sc *corev1.SecurityContext) corev1.Container {
	args := []string{GateSubcommand, "-timeout", orDefault(g.Timeout, DefaultGateTimeout).String()}
	if g.Target != "" {
		args = append(args, "-target", g.Target)
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("50m"),
		corev1.ResourceMemory: resource.MustParse("32Mi"),
	}
	return corev1.Container{
		Name:                     GateContainerName,
		Image:                    g.Image,
		ImagePullPolicy:          pull,
		Args:                     args,
		Resources:                corev1.ResourceRequirements{Limits: res, Requests: res.DeepCopy()},
		SecurityContext:          sc.DeepCopy(),
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
}
