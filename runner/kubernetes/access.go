package kubernetes

// Permission is one resource and the verbs Alfred uses on it, all in the runtime's one
// namespace (Options.Namespace).
type Permission struct {
	// Group is the resource's API group: "" for the core group (Pods, Secrets, ...),
	// "networking.k8s.io" for NetworkPolicies.
	Group string
	// Resource is the resource's plural name, with its subresource after a slash
	// ("pods/log").
	Resource string
	// Verbs are the RBAC verbs used on it ("create", "get", "list", "watch", "patch",
	// "update", "delete").
	Verbs []string
	// Why names the calls that use them, for the doctor's messages.
	Why string
}

// Access is every permission the Kubernetes runtime needs, and nothing more: what Runtime
// calls (Start, Wait, Logs, Stop, Destroy, List, Adopt, SweepLeftovers, ApplyEgressPolicy) and
// what `alfred serve` reads at start-up (the state claim). deploy/kubernetes/runs-role.yaml
// grants exactly these in a Role (a test holds the two equal), and `alfred doctor` checks each
// verb with a SelfSubjectAccessReview.
var Access = []Permission{
	{Resource: "pods", Verbs: []string{"create", "get", "list", "watch", "patch", "delete"},
		Why: "Start creates a run's Pod; Start and Wait get and watch it; Stop patches its deadline; Destroy deletes it; List and Adopt find runs after a restart"},
	{Resource: "pods/log", Verbs: []string{"get"},
		Why: "Logs reads a run's output"},
	{Resource: "secrets", Verbs: []string{"create", "get", "list", "update", "delete"},
		Why: "Start creates the run's environment Secret and updates it to be owned by its Pod; a taken name is read; Destroy deletes it; SweepLeftovers lists the runs' Secrets to remove those whose Pod is gone"},
	{Resource: "persistentvolumeclaims", Verbs: []string{"get"},
		Why: "alfred serve reads the state claim at start-up"},
	{Group: "networking.k8s.io", Resource: "networkpolicies", Verbs: []string{"get", "create", "update"},
		Why: "ApplyEgressPolicy reads the runs' egress NetworkPolicy at start-up, and creates it or updates it to the configured allowlist"},
}
