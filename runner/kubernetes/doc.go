// Package kubernetes implements runner.Runtime on Kubernetes (k8s.io/client-go, tested against
// Kubernetes v1.34): each run is one Pod in one namespace, compiled from its
// runner.ContainerSpec by PodFor (pure, golden-tested) and driven by Runtime. Alfred uses it
// when the configuration says runner.runtime: kubernetes (spec/kubernetes.md).
//
// # The mapping
//
// Each run is one Pod of one container (ContainerName), restartPolicy Never, named and labelled
// as the spec (Alfred's labels, "alfred.managed=true" and the others, are valid Kubernetes labels
// as they are; a name or label Kubernetes would refuse is refused). The container runs the
// image's entrypoint with spec.Cmd as its arguments, as Docker does, in spec.WorkingDir, and is
// hardened like runner/docker's: runAsUser and runAsGroup from spec.User (numeric, never uid
// 0), runAsNonRoot, a read-only root filesystem, allowPrivilegeEscalation false, every
// capability dropped, the RuntimeDefault seccomp profile, no service account token, no service
// links. /tmp and runner.HomeDir are memory-backed emptyDir volumes, the tmpfs of runner/docker.
// spec.Limits.MemoryBytes and NanoCPUs become the container's limits, and its requests where
// Options.Requests names no smaller reservation; Limits.PIDs has no per-Pod field in Kubernetes (the
// kubelet's podPidsLimit is one value for the whole node) and is not applied. spec.HostNetwork
// is the Pod's hostNetwork; Options.Timeout, when set, its activeDeadlineSeconds.
//
// The environment never appears in the Pod: every spec.Env entry is a key of a Secret of the
// same name and labels as the Pod, and the container reads each variable from it
// (secretKeyRef). The Secret is created first, and the Pod is made its owner once it exists.
//
// # Mounts are sub-paths of the state claim
//
// spec.Mounts are directories under Alfred's data directory. With Options.StateClaim set (what
// `alfred serve` does with runner.runtime: kubernetes), the data directory is that
// PersistentVolumeClaim, mounted by Alfred at Options.StateRoot, and each mount becomes a
// volume mount of the claim at the sub-path relative to StateRoot, with the mount's read-only
// flag; a mount outside StateRoot is refused, so a Pod sees only its run's directories
// (spec/kubernetes.md, "Per-issue state"). Without a StateClaim each mount is a hostPath volume
// (type Directory): valid only on a single-node cluster whose node shares this process's
// filesystem, such as the test cluster of scripts/test-cluster.sh.
//
// # The runtime
//
// A run's runner.ContainerID is its Pod's name. Runtime.Start creates the Secret, then the Pod,
// and waits until the container runs: a name already held by a Pod or a Secret is refused
// (runner.ErrNameConflict, the holder untouched), and an image the node cannot have is
// runner.ErrImageNotFound (set Options.PullPolicy to corev1.PullNever where no registry is
// reachable). Kubernetes stops a container only by ending its Pod: Runtime.Stop lowers the
// Pod's activeDeadlineSeconds, so the kubelet ends the container with the grace fixed at
// creation (Options.StopGrace) and the Pod keeps its exit code and logs until Destroy.
//
// Kubernetes' log API merges stdout and stderr into one stream: Runtime.Logs returns it as
// stdout, with stderr empty.
//
// # Egress
//
// Runtime.ApplyEgressPolicy keeps the runs' NetworkPolicy (NetworkPolicyFor: DNS and the
// allowlist's addresses; or every destination when open), created or updated when Alfred
// starts, before any run. A Pod whose spec has an allowlist (spec.Egress) starts with the init
// container GateContainerName, Options.EgressGate: `alfred egress-gate` (WaitFiltered) holds the
// agent's container until a connection off the list fails, that is until the node's firewall
// filters the Pod, and fails the Pod (Start: ErrEgressOpen) when it never does.
//
// # Permissions
//
// Access lists every verb the runtime uses (core API group, and networkpolicies of
// networking.k8s.io), all in its one namespace (the runs', not Alfred's own): the Role of
// deploy/kubernetes (runs-role.yaml) grants exactly these (deploy/deploytest holds the two equal), and
// `alfred doctor` checks each with a SelfSubjectAccessReview. A new call on the API adds its
// verb to Access.
package kubernetes
