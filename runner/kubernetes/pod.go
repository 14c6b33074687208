package kubernetes

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/alfred-bot/alfred/runner"
)

// ContainerName is the name of the one container of every run's Pod.
const ContainerName = "run"

// DefaultStopGrace is the Pod's terminationGracePeriodSeconds when Options.StopGrace is zero.
const DefaultStopGrace = 5 * time.Second

// Options are the installation's side of PodFor: what the Pod gets beyond its ContainerSpec.
type Options struct {
	// Namespace is the namespace of the Pod and its Secret.
	Namespace string
	// PullPolicy is the image pull policy (corev1.PullIfNotPresent if empty). The test cluster
	// reaches no registry: its Pods use PullNever or PullIfNotPresent with imported images.
	PullPolicy corev1.PullPolicy
	// Timeout, when positive, becomes the Pod's activeDeadlineSeconds (rounded up to whole
	// seconds): the kubelet kills the Pod that long after it started. Zero sets no deadline
	// (the Executor enforces runner.Limits.Timeout itself).
	Timeout time.Duration
	// StopGrace is the Pod's terminationGracePeriodSeconds (rounded up to whole seconds,
	// DefaultStopGrace if zero): how long the kubelet waits between SIGTERM and SIGKILL when
	// Runtime.Stop or the deadline ends the run. Kubernetes fixes it when the Pod is created.
	StopGrace time.Duration
	// Requests are the container's resource requests (what the scheduler reserves), resource
	// by resource: a resource named here is requested at this quantity, any other at its limit
	// (the spec's Limits). Kubernetes refuses a request above its limit.
	Requests corev1.ResourceList
	// StateClaim, when set, is the PersistentVolumeClaim holding Alfred's data directory, and
	// StateRoot the absolute path Alfred sees it at (its data_dir). Every spec mount must then
	// lie under StateRoot and becomes a mount of the claim at the sub-path relative to it; a
	// mount elsewhere is refused. Without a StateClaim, mounts are hostPath volumes (only valid
	// on a single-node cluster sharing this process's file system; see the package
	// documentation).
	StateClaim string
	// StateRoot is the path of the state claim in Alfred's file system (see StateClaim).
	StateRoot string
	// ServiceAccount is the service account the Pod names (the namespace's "default" when
	// empty). Its token is never mounted.
	ServiceAccount string
	// NodeSelector, Tolerations and Affinity place the Pod (runner.kubernetes.node_selector,
	// tolerations, affinity): copied into its spec as they are.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	Affinity     *corev1.Affinity
	// EgressGate is the init container of every Pod whose spec has an egress allowlist
	// (runner.ContainerSpec.Egress): the agent's container starts only once the runs'
	// NetworkPolicy filters the Pod (EgressGate). Such a spec is refused without it.
	EgressGate *EgressGate
}

// PodFor compiles spec into the run's Pod and, when spec.Env is not empty, the Secret holding
// its environment (nil otherwise). It is pure: it reads and creates nothing. Both objects are
// named spec.Name, in opts.Namespace, with spec.Labels; the caller creates the Secret first and
// makes the Pod its owner once the Pod exists (Runtime.Start does).
//
// Errors: a name that is not a DNS label; no image; an empty, root (uid 0) or non-numeric
// user (Kubernetes takes numeric ids only); a label key or value Kubernetes does not accept; an
// environment entry without "=" or whose name is not a valid Secret key; a mount path that is
// not absolute, or two mounts at one target; an egress allowlist without opts.EgressGate (its
// first instants would be unfiltered).
func PodFor(spec runner.ContainerSpec, opts Options) (*corev1.Pod, *corev1.Secret, error) {
	if errs := validation.IsDNS1123Label(spec.Name); len(errs) > 0 {
		return nil, nil, fmt.Errorf("container spec %q: name: %s", spec.Name, strings.Join(errs, "; "))
	}
	if spec.Image == "" {
		return nil, nil, fmt.Errorf("container spec %s: image is required", spec.Name)
	}
	uid, gid, err := parseUser(spec.User)
	if err != nil {
		return nil, nil, fmt.Errorf("container spec %s: %w", spec.Name, err)
	}
	if err := checkLabels(spec.Labels); err != nil {
		return nil, nil, fmt.Errorf("container spec %s: %w", spec.Name, err)
	}
	env, data, err := secretEnv(spec.Name, spec.Env)
	if err != nil {
		return nil, nil, fmt.Errorf("container spec %s: %w", spec.Name, err)
	}
	volumes, mounts, err := volumesFor(spec.Mounts, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("container spec %s: %w", spec.Name, err)
	}
	if spec.Egress != nil && (opts.EgressGate == nil || opts.EgressGate.Image == "") {
		return nil, nil, fmt.Errorf("container spec %s: an egress allowlist needs the egress gate's image (runner.kubernetes.egress_gate_image), "+
			"or the Pod's first instants would be unfiltered", spec.Name)
	}

	meta := metav1.ObjectMeta{Name: spec.Name, Namespace: opts.Namespace, Labels: maps.Clone(spec.Labels)}
	limits := corev1.ResourceList{}
	if spec.Limits.MemoryBytes > 0 {
		limits[corev1.ResourceMemory] = *resource.NewQuantity(spec.Limits.MemoryBytes, resource.BinarySI)
	}
	if spec.Limits.NanoCPUs > 0 {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(spec.Limits.MilliCPUs(), resource.DecimalSI)
	}
	var res corev1.ResourceRequirements
	if len(limits) > 0 {
		res.Limits = limits
		res.Requests = limits.DeepCopy()
	}
	for name, q := range opts.Requests {
		if res.Requests == nil {
			res.Requests = corev1.ResourceList{}
		}
		res.Requests[name] = q.DeepCopy()
	}

	pull := opts.PullPolicy
	if pull == "" {
		pull = corev1.PullIfNotPresent
	}
	grace := seconds(opts.StopGrace)
	if opts.StopGrace <= 0 {
		grace = seconds(DefaultStopGrace)
	}
	sc := &corev1.SecurityContext{
		RunAsUser:                &uid,
		RunAsGroup:               gid,
		RunAsNonRoot:             new(true),
		ReadOnlyRootFilesystem:   new(true),
		AllowPrivilegeEscalation: new(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	var inits []corev1.Container
	if spec.Egress != nil {
		inits = []corev1.Container{gateContainer(opts.EgressGate, pull, sc)}
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: meta,
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  new(false),
			EnableServiceLinks:            new(false),
			HostNetwork:                   spec.HostNetwork,
			ServiceAccountName:            opts.ServiceAccount,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: inits,
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           spec.Image,
				ImagePullPolicy: pull,
				Command:         nil, // the image's ENTRYPOINT stays, as with Docker
				Args:            spec.Cmd,
				WorkingDir:      spec.WorkingDir,
				Env:             env,
				Resources:       res,
				VolumeMounts:    mounts,
				SecurityContext: sc,
			}},
			Volumes:      volumes,
			NodeSelector: maps.Clone(opts.NodeSelector),
			Tolerations:  slices.Clone(opts.Tolerations),
			Affinity:     opts.Affinity.DeepCopy(),
		},
	}
	if opts.Timeout > 0 {
		d := seconds(opts.Timeout)
		pod.Spec.ActiveDeadlineSeconds = &d
	}
	if len(data) == 0 {
		return pod, nil, nil
	}
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: *meta.DeepCopy(),
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	return pod, secret, nil
}

// parseUser reads "uid" or "uid:gid", both numeric, and refuses uid 0.
func parseUser(user string) (int64, *int64, error) {
	u, g, hasGID := strings.Cut(user, ":")
	if u == "" {
		return 0, nil, errors.New("user is required (uid:gid, never root)")
	}
	uid, err := strconv.ParseInt(u, 10, 64)
	if err != nil || uid < 0 {
		if u == "root" {
			return 0, nil, errors.New("refusing to run as root")
		}
		return 0, nil, fmt.Errorf("user %q: Kubernetes takes a numeric uid", user)
	}
	if uid == 0 {
		return 0, nil, errors.New("refusing to run as uid 0")
	}
	if !hasGID {
		return uid, nil, nil
	}
	gid, err := strconv.ParseInt(g, 10, 64)
	if err != nil || gid < 0 {
		return 0, nil, fmt.Errorf("user %q: Kubernetes takes a numeric gid", user)
	}
	return uid, &gid, nil
}

// checkLabels refuses labels Kubernetes would refuse. Alfred's own (runner.LabelManaged and
// the others: "alfred.<word>" keys, "true", decimal ids, phase names, hex instance ids) all fit
// as they are, so no label is rewritten and List selects on the values Alfred uses.
func checkLabels(labels map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if e := validation.IsQualifiedName(k); len(e) > 0 {
			errs = append(errs, fmt.Errorf("label key %q: %s", k, strings.Join(e, "; ")))
		}
		if e := validation.IsValidLabelValue(labels[k]); len(e) > 0 {
			errs = append(errs, fmt.Errorf("label %s value %q: %s", k, labels[k], strings.Join(e, "; ")))
		}
	}
	return errors.Join(errs...)
}

// secretEnv turns KEY=value entries into the Secret's data and the container's env entries,
// each read from the Secret by key, in the order of first appearance (a repeated key keeps
// its last value, as with Docker). No value appears in the returned env.
func secretEnv(secret string, entries []string) ([]corev1.EnvVar, map[string][]byte, error) {
	if len(entries) == 0 {
		return nil, nil, nil
	}
	data := map[string][]byte{}
	var env []corev1.EnvVar
	for _, e := range entries {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			// Only the part before "=" may be shown: the entry could be a value.
			return nil, nil, errors.New("environment entry without KEY= (refused; its content is not shown)")
		}
		if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
			return nil, nil, fmt.Errorf("environment variable %q: not a valid Secret key: %s", k, strings.Join(errs, "; "))
		}
		if _, seen := data[k]; !seen {
			env = append(env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: k},
			}})
		}
		data[k] = []byte(v)
	}
	return env, data, nil
}

// Volume names of the writable directories every Pod gets, and of the state claim.
const (
	volumeTmp   = "tmp"
	volumeHome  = "home"
	volumeState = "state"
)

// volumesFor returns the Pod's volumes and the container's mounts: a memory-backed emptyDir at
// /tmp and at runner.HomeDir (runner/docker's tmpfs; a spec mount at the same target replaces
// it), then, in order and with its read-only flag, each spec mount: a sub-path of the state
// claim when opts.StateClaim is set, else a hostPath volume.
func volumesFor(ms []runner.Mount, opts Options) ([]corev1.Volume, []corev1.VolumeMount, error) {
	if opts.StateClaim != "" && !strings.HasPrefix(opts.StateRoot, "/") {
		return nil, nil, fmt.Errorf("state claim %s: its root must be an absolute path, got %q", opts.StateClaim, opts.StateRoot)
	}
	targets := map[string]bool{}
	for _, m := range ms {
		if !strings.HasPrefix(m.Source, "/") || !strings.HasPrefix(m.Target, "/") {
			return nil, nil, fmt.Errorf("mount %s→%s: paths must be absolute", m.Source, m.Target)
		}
		if targets[m.Target] {
			return nil, nil, fmt.Errorf("mount %s→%s: two mounts at one target", m.Source, m.Target)
		}
		targets[m.Target] = true
	}
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, w := range []struct{ name, path string }{{volumeTmp, "/tmp"}, {volumeHome, runner.HomeDir}} {
		if targets[w.path] {
			continue
		}
		vols = append(vols, corev1.Volume{Name: w.name, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: w.name, MountPath: w.path})
	}
	if opts.StateClaim != "" {
		root := path.Clean(opts.StateRoot)
		if len(ms) > 0 {
			vols = append(vols, corev1.Volume{Name: volumeState, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: opts.StateClaim},
			}})
		}
		for _, m := range ms {
			rel, ok := strings.CutPrefix(path.Clean(m.Source), root+"/")
			if !ok || rel == "" {
				return nil, nil, fmt.Errorf("mount %s→%s: not under the state root %s (on Kubernetes every mount is a sub-path of the state claim %s)",
					m.Source, m.Target, root, opts.StateClaim)
			}
			mounts = append(mounts, corev1.VolumeMount{Name: volumeState, MountPath: m.Target, SubPath: rel, ReadOnly: m.ReadOnly})
		}
		return vols, mounts, nil
	}
	dir := corev1.HostPathDirectory
	for i, m := range ms {
		name := "mount-" + strconv.Itoa(i)
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: m.Source, Type: &dir},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: m.Target, ReadOnly: m.ReadOnly})
	}
	return vols, mounts, nil
}

// seconds rounds d up to whole seconds, at least 1.
func seconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}
