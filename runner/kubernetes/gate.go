package kubernetes

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/alfred-bot/alfred/runner/kubernetes/egressgate"
)

// GateContainerName is the name of the init container of a confined run's Pod (EgressGate).
const GateContainerName = "egress-gate"

// DefaultGateTimeout bounds the gate's wait when EgressGate.Timeout is zero
// (egressgate.DefaultTimeout).
const DefaultGateTimeout = egressgate.DefaultTimeout

// GateSubcommand is the subcommand of the alfred binary the gate runs (egressgate.Subcommand).
const GateSubcommand = egressgate.Subcommand

// EgressGate closes the first instants of a run: a NetworkPolicy is enforced by the node's
// firewall (kube-router, Calico, Cilium, ...), which installs a new Pod's rules a moment after
// the Pod's network exists, so a container started at once could connect anywhere until then.
// A Pod whose spec has an egress allowlist (runner.ContainerSpec.Egress) therefore gets an init
// container, GateContainerName, that runs egressgate.WaitFiltered: it dials Target until a connection
// fails (refused, unreachable or timed out: the policy holds the Pod), then exits 0, and only
// then does the kubelet start the agent's container, in the same network namespace and under
// the same policy. Until Timeout it exits 1 with the reason, the Pod fails, and so does the run
// (Start's error names the gate): fail closed. The init container is hardened as the agent's
// (the runs' uid, read-only root, no capability), so Pod Security restricted admits it.
type EgressGate struct {
	// Image runs egressgate.Main on the arguments after GateSubcommand: Alfred's own image
	// (runner.kubernetes.egress_gate_image), whose entrypoint is alfred.
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

// ErrEgressOpen is returned when a run's egress gate never saw its Pod filtered
// (egressgate.ErrOpen).
var ErrEgressOpen = egressgate.ErrOpen

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
