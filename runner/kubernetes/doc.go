// Package kubernetes turns a run's runner.ContainerSpec into a Kubernetes Pod (PodFor, pure,
// golden-tested).
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
// spec.Limits.MemoryBytes and NanoCPUs become the container's limits (and its requests, unless
// Options.Requests says otherwise); Limits.PIDs has no per-Pod field in Kubernetes (the
// kubelet's podPidsLimit is one value for the whole node) and is not applied. spec.HostNetwork
// is the Pod's hostNetwork; Options.Timeout, when set, its activeDeadlineSeconds.
//
// The environment never appears in the Pod: every spec.Env entry is a key of a Secret of the
// same name and labels as the Pod, and the container reads each variable from it
// (secretKeyRef). The Secret is created first, and the Pod is made its owner once it exists.
//
// # Mounts are hostPath volumes, for now
//
// spec.Mounts are host directories, and each becomes a hostPath volume (type Directory) with
// the same read-only flag. This is an interim step that is only valid on a single-node cluster
// whose node shares this process's filesystem, such as the test cluster of
// scripts/test-cluster.sh (spec/kubernetes.md): on any other cluster the Pod would see the
// node's directories, not Alfred's. The next step replaces them with a PersistentVolumeClaim per
// issue.
package kubernetes
