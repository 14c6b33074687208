package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ErrImageMissing is wrapped by Cluster.RunPod when no node can have the image (not present,
// and not pullable under the configured pull policy).
var ErrImageMissing = errors.New("image missing on the cluster")

// Cluster is the Kubernetes API as the checks of runner.runtime: kubernetes need it, with the
// credentials and in the namespace Alfred's runtime uses.
type Cluster interface {
	// Version returns the API server's version ("v1.34.4"): it answers and accepts the
	// credentials.
	Version(ctx context.Context) (string, error)
	// Allowed reports whether the credentials may do verb on resource ("pods", "pods/log"
	// with its subresource, or "networkpolicies.networking.k8s.io" with its API group, as
	// kubectl writes it) in the namespace: a SelfSubjectAccessReview.
	Allowed(ctx context.Context, resource, verb string) (bool, error)
	// Claim returns the state claim as the API has it; Exists is false when there is none.
	Claim(ctx context.Context) (ClaimStatus, error)
	// RunPod runs one Pod of image (with args, or the image's default command when empty) in
	// the namespace, hardened as a run's Pod, until its container ends, then deletes it.
	// Errors: the image cannot be had (wraps ErrImageMissing); the Pod was refused, never
	// ran or did not end within the caller's deadline.
	RunPod(ctx context.Context, image string, args []string) (PodRun, error)
	// EnforcesRestricted reports whether the namespace's Pod Security admission enforces the
	// "restricted" profile (pod-security.kubernetes.io/enforce: restricted): a Pod on the host
	// network, created as a server-side dry run, is refused.
	EnforcesRestricted(ctx context.Context) (bool, error)
}

// ClaimStatus is what the checks read of a PersistentVolumeClaim.
type ClaimStatus struct {
	// Exists is false when the namespace has no claim of that name.
	Exists bool
	// Phase is the claim's status phase: "Bound", "Pending" or "Lost".
	Phase string
	// AccessModes are the modes of the bound volume (the requested ones while Pending):
	// "ReadWriteMany", "ReadWriteOnce", ...
	AccessModes []string
	// StorageClass is the claim's storage class name, empty when it has none.
	StorageClass string
}

// PodRun is how a Pod of RunPod ended.
type PodRun struct {
	// Exit is the container's exit code.
	Exit int
	// Took is the time from the Pod's creation to its container's end.
	Took time.Duration
}

// Permission is one resource and the verbs Alfred's runtime uses on it, in its namespace
// (cmd/alfred passes runner/kubernetes.Access).
type Permission struct {
	// Resource is the resource's plural name, with a subresource after a slash ("pods/log")
	// and its API group, if not the core one, after a dot ("networkpolicies.networking.k8s.io").
	Resource string
	// Verbs are the RBAC verbs needed.
	Verbs []string
	// Why names the calls that need them.
	Why string
}

// Kubernetes is the side of Config checked when runner.runtime is kubernetes, in place of the
// Docker engine.
type Kubernetes struct {
	// Namespace is the runtime's namespace (runner.kubernetes.namespace), StateClaim its state
	// claim (runner.kubernetes.state_claim); both only name things in the messages.
	Namespace, StateClaim string
	// Cluster reaches the API with Alfred's credentials.
	Cluster Cluster
	// Permissions are the verbs to check, each with a SelfSubjectAccessReview.
	Permissions []Permission
	// EgressPolicy is the runs' NetworkPolicy Alfred applies at start-up (runner/kubernetes.
	// ApplyEgressPolicy) when runner.egress.mode is allowlist, "" when open; EgressNames are
	// the allowlist's entries whose host is a name, which a NetworkPolicy cannot hold.
	EgressPolicy string
	EgressNames  []string
}

// checkKubernetes checks the cluster: the API answers, every permission is granted, the state
// claim is bound, and a Pod of each container agent's image runs to completion. Each line
// names what is missing (the verb, the claim, the image).
func checkKubernetes(ctx context.Context, r *Report, cfg Config) {
	k := cfg.Kubernetes
	v, err := bounded(ctx, r.quick, k.Cluster.Version)
	if err != nil {
		r.add("kubernetes: API", Fail, "unreachable: "+err.Error(),
			"check runner.kubernetes.kubeconfig (empty: the Pod's service account) and that the API server answers")
		return
	}
	r.add("kubernetes: API", OK, "Kubernetes "+v+" answers; namespace "+k.Namespace, "")
	denied := false
	for _, p := range k.Permissions {
		var missing []string
		var errs []string
		for _, verb := range p.Verbs {
			ok, err := bounded(ctx, r.quick, func(ctx context.Context) (bool, error) { return k.Cluster.Allowed(ctx, p.Resource, verb) })
			switch {
			case err != nil:
				errs = append(errs, verb+": "+err.Error())
			case !ok:
				missing = append(missing, verb)
			}
		}
		name := "kubernetes: RBAC " + p.Resource
		switch {
		case len(errs) > 0:
			denied = true
			r.add(name, Fail, "cannot check: "+strings.Join(errs, "; "),
				"let Alfred's credentials create selfsubjectaccessreviews (every authenticated user may, through system:basic-user)")
		case len(missing) > 0:
			denied = true
			r.add(name, Fail, fmt.Sprintf("missing verb %s on %s in namespace %s (needed: %s; %s)",
				strings.Join(missing, ", "), p.Resource, k.Namespace, strings.Join(p.Verbs, ", "), p.Why),
				"grant them to Alfred's service account in the runs' namespace: the Role alfred-runtime of deploy/kubernetes/runs-role.yaml")
		default:
			r.add(name, OK, strings.Join(p.Verbs, ", ")+" allowed", "")
		}
	}
	checkClaim(ctx, r, k)
	checkRestricted(ctx, r, k, denied)
	checkEgressNames(r, k)
	for _, a := range cfg.Agents {
		if a.API != nil {
			continue
		}
		if denied {
			r.add("agent "+a.Name+": image", Skip, "not checked: permissions are missing (above)", "")
			continue
		}
		if checkPod(ctx, r, k, a) {
			checkCLI(ctx, r, cfg, a)
		}
	}
}

// checkRestricted fails unless the runs' namespace enforces Pod Security "restricted": a run's
// Pod is then never privileged, whatever Alfred (or a bug) asks for.
func checkRestricted(ctx context.Context, r *Report, k *Kubernetes, denied bool) {
	const name = "kubernetes: Pod Security"
	if denied {
		r.add(name, Skip, "not checked: permissions are missing (above)", "")
		return
	}
	ok, err := bounded(ctx, r.quick, k.Cluster.EnforcesRestricted)
	switch {
	case err != nil:
		r.add(name, Fail, "cannot check: "+err.Error(), "")
	case !ok:
		r.add(name, Fail, "namespace "+k.Namespace+" does not enforce the restricted profile: a privileged Pod would be admitted",
			"label it: kubectl label namespace "+k.Namespace+" pod-security.kubernetes.io/enforce=restricted")
	default:
		r.add(name, OK, "namespace "+k.Namespace+" enforces restricted", "")
	}
}

// checkEgressNames warns of the allowlist's entries by host name: the runs' NetworkPolicy holds
// addresses only, so the runs cannot reach them unless their addresses are listed too. Nothing
// is said with runner.egress.mode open.
func checkEgressNames(r *Report, k *Kubernetes) {
	const name = "kubernetes: egress"
	switch {
	case k.EgressPolicy == "": // runner.egress.mode open: nothing to hold
	case len(k.EgressNames) > 0:
		r.add(name, Warn, fmt.Sprintf("NetworkPolicy %s holds addresses only; not in it, so unreachable from the runs: %s",
			k.EgressPolicy, strings.Join(k.EgressNames, ", ")),
			"add each host's address as IP:port to runner.egress.allow (the addresses its provider publishes, or those of a gateway you route it through)")
	default:
		r.add(name, OK, "every allowlist entry is an address: NetworkPolicy "+k.EgressPolicy+" holds them all", "")
	}
}

func checkClaim(ctx context.Context, r *Report, k *Kubernetes) {
	name := "kubernetes: state claim " + k.StateClaim
	c, err := bounded(ctx, r.quick, k.Cluster.Claim)
	switch {
	case err != nil:
		r.add(name, Fail, "cannot read it: "+err.Error(), "check the permission to get persistentvolumeclaims (above)")
		return
	case !c.Exists:
		r.add(name, Fail, "no such claim in namespace "+k.Namespace,
			"create it (deploy/kubernetes/state.yaml: ReadWriteMany, a storage class of your cluster) or set runner.kubernetes.state_claim")
		return
	case c.Phase != "Bound":
		r.add(name, Fail, fmt.Sprintf("%s, not Bound (storage class %q, access modes %s)", c.Phase, c.StorageClass, strings.Join(c.AccessModes, ", ")),
			"give it a storage class that provisions ReadWriteMany volumes (kubectl describe pvc "+k.StateClaim+" says why it waits), or a PersistentVolume it binds to")
		return
	case !slices.Contains(c.AccessModes, "ReadWriteMany"):
		r.add(name, Warn, "Bound, but "+strings.Join(c.AccessModes, ", ")+": Alfred and every run's Pod must then be on one node",
			"use a ReadWriteMany storage class (deploy/kubernetes/README.md, \"Storage\")")
		return
	}
	r.add(name, OK, "Bound, ReadWriteMany", "")
}

// checkPod runs a Pod of a's image and reports whether it ran.
func checkPod(ctx context.Context, r *Report, k *Kubernetes, a Agent) bool {
	name := "agent " + a.Name + ": image"
	run, err := bounded(ctx, r.long, func(ctx context.Context) (PodRun, error) { return k.Cluster.RunPod(ctx, a.Image, a.VersionCommand) })
	switch {
	case errors.Is(err, ErrImageMissing):
		s := Fail
		if len(a.Phases) == 0 {
			s = Warn
		}
		r.add(name, s, a.Image+" cannot be had on the cluster: "+err.Error(),
			"push "+a.Image+" to a registry the nodes can pull from (with imagePullSecrets on the service account runner.kubernetes.service_account), or load it into every node")
		return false
	case err != nil:
		r.add(name, Fail, "a Pod of "+a.Image+" did not run to completion in namespace "+k.Namespace+": "+err.Error(),
			"kubectl get events -n "+k.Namespace+" says what refused or held the Pod (admission, quota, scheduling)")
		return false
	}
	what := "its default command"
	if len(a.VersionCommand) > 0 {
		what = strings.Join(a.VersionCommand, " ")
	}
	if run.Exit != 0 {
		r.add(name, Fail, fmt.Sprintf("a Pod of %s (%s) ran in namespace %s but exited %d: the image does not run the %s agent",
			a.Image, what, k.Namespace, run.Exit, a.Adapter),
			"the Pod's log in namespace "+k.Namespace+" says why; build the image again so that its command runs (deploy/agents/Dockerfile; make script-agent-image for the script agent)")
		return false
	}
	r.add(name, OK, fmt.Sprintf("%s present or pullable: a Pod of it (%s) ran to completion in namespace %s (exit %d, %s)",
		a.Image, what, k.Namespace, run.Exit, run.Took.Round(100*time.Millisecond)), "")
	return true
}

// guardedValue is guarded for a probe returning a value.
func guardedValue[T any](probe func() (T, error)) (T, error) {
	var v T
	err := guarded(func() error {
		var err error
		v, err = probe()
		return err
	})
	return v, err
}
