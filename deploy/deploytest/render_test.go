package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	goyaml "github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/yaml"
	k8s "k8s.io/client-go/kubernetes"
	k8sscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
)

// kubectl returns the path of a kubectl (kubetest.Kubectl).
func kubectl(tb testing.TB) string { return kubetest.Kubectl(tb) }

// run runs kubectl with args and returns its standard output and error.
func run(tb testing.TB, args ...string) (stdout, stderr string) {
	tb.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(kubectl(tb), args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(tb, cmd.Run(), "kubectl %s:\n%s%s", strings.Join(args, " "), errb.String(), out.String())
	return out.String(), errb.String()
}

// manifests returns deploy/kubernetes's directory.
func manifests(tb testing.TB) string {
	return filepath.Join(kubetest.RepoRoot(tb), "deploy", "kubernetes")
}

// decode splits a rendered multi-document YAML into typed objects.
func decode(tb testing.TB, rendered string) []any {
	tb.Helper()
	var objs []any
	r := yaml.NewYAMLReader(bufio.NewReader(strings.NewReader(rendered)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(tb, err)
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := k8sscheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		require.NoError(tb, err, "decode:\n%s", doc)
		objs = append(objs, obj)
	}
}

// overlay writes a kustomization of the test's own in a new directory, wrapping base (a
// kustomization directory, given relative to the repository root), with more (YAML lines of a
// Kustomization) and files (name → content) beside it; it returns the directory. It sets no
// namespace: deploy/kubernetes names its two in every object, and placed moves them.
func overlay(tb testing.TB, base, more string, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	// kustomize takes no absolute path to a base, and refuses one that contains the overlay.
	rel, err := filepath.Rel(dir, filepath.Join(kubetest.RepoRoot(tb), base))
	require.NoError(tb, err)
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel + "\n" + more
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	for name, content := range files {
		require.NoError(tb, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	return dir
}

// The namespaces of deploy/kubernetes (namespaces.yaml): Alfred's own, and the runs'.
const (
	alfredNamespace = "alfred"
	runsNamespace   = "alfred-runs"
)

// placed moves the objects of rendered (deploy/kubernetes or an overlay of it, as kubectl
// kustomize renders it) into a test's own two namespaces, wherever the manifests name theirs:
// Alfred's becomes alfredNS and the runs' runsNS in the objects' namespaces, the Namespace
// objects, the RoleBinding's subjects and the PersistentVolumes' claim references. The
// PersistentVolumes are cluster-wide: each is renamed after its claim's new namespace
// ("<namespace>-state") and mounts the host directory dir in place of the manifests' NFS
// export (on the single-node test cluster the node is this machine), every one the same
// directory as every one the same export; each claim names its renamed volume. It returns
// the objects as a stream for kubectl apply -f, and deletes the volumes when the test ends.
func placed(tb testing.TB, cs k8s.Interface, rendered, alfredNS, runsNS, dir string) string {
	tb.Helper()
	rename := map[string]string{alfredNamespace: alfredNS, runsNamespace: runsNS}
	to := func(ns string) string {
		n, ok := rename[ns]
		require.True(tb, ok, "namespace %q is neither Alfred's nor the runs'", ns)
		return n
	}
	var objs []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(rendered), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(tb, err)
		if m != nil {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	volumes := map[string]string{} // the manifests' name → the test's
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" {
			o.SetNamespace(to(ns))
		}
		switch o.GetKind() {
		case "Namespace":
			o.SetName(to(o.GetName()))
		case "RoleBinding":
			subjects, _, err := unstructured.NestedSlice(o.Object, "subjects")
			require.NoError(tb, err)
			for _, s := range subjects {
				s := s.(map[string]any)
				if ns, ok := s["namespace"].(string); ok {
					s["namespace"] = to(ns)
				}
			}
			require.NoError(tb, unstructured.SetNestedSlice(o.Object, subjects, "subjects"))
		case "PersistentVolume":
			ns, _, _ := unstructured.NestedString(o.Object, "spec", "claimRef", "namespace")
			name := to(ns) + "-state"
			volumes[o.GetName()] = name
			o.SetName(name)
			require.NoError(tb, unstructured.SetNestedField(o.Object, to(ns), "spec", "claimRef", "namespace"))
			_, found, _ := unstructured.NestedMap(o.Object, "spec", "nfs")
			require.True(tb, found, "the manifests' volume %s is an NFS export", name)
			unstructured.RemoveNestedField(o.Object, "spec", "nfs")
			require.NoError(tb, unstructured.SetNestedMap(o.Object, map[string]any{"path": dir, "type": "Directory"}, "spec", "hostPath"))
			tb.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := cs.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					tb.Errorf("delete persistent volume %s: %v", name, err)
				}
			})
		}
	}
	var out strings.Builder
	for _, o := range objs {
		if o.GetKind() == "PersistentVolumeClaim" {
			v, _, _ := unstructured.NestedString(o.Object, "spec", "volumeName")
			require.Contains(tb, volumes, v, "claim %s/%s names a volume of the manifests", o.GetNamespace(), o.GetName())
			require.NoError(tb, unstructured.SetNestedField(o.Object, volumes[v], "spec", "volumeName"))
		}
		b, err := json.Marshal(o.Object)
		require.NoError(tb, err)
		out.WriteString("---\n")
		out.Write(b)
		out.WriteString("\n")
	}
	return out.String()
}

// apply writes objects (placed's stream) to a file and runs kubectl apply -f on it, with more
// flags ("--dry-run=server"); it returns kubectl's standard output and error.
func apply(tb testing.TB, kubeconfig, objects string, more ...string) (stdout, stderr string) {
	tb.Helper()
	f := filepath.Join(tb.TempDir(), "objects.yaml")
	require.NoError(tb, os.WriteFile(f, []byte(objects), 0o600))
	return run(tb, append([]string{"--kubeconfig", kubeconfig, "apply", "-f", f}, more...)...)
}

// TestRoleIsRuntimeAccess holds the Role of deploy/kubernetes equal to
// runner/kubernetes.Access, the verbs the runtime's code uses (which `alfred doctor` checks):
// a verb the code starts using fails here until the Role grants it, and a verb granted but not
// used fails too. The Role is the only one, in the runs' namespace (runner.kubernetes.namespace
// of the ConfigMap): Alfred's own namespace grants nothing, none of its Secrets. The
// RoleBinding gives the Role to the service account the Deployment runs as, of the
// Deployment's namespace.
func TestRoleIsRuntimeAccess(t *testing.T) {
	out, _ := run(t, "kustomize", manifests(t))
	var roles []*rbacv1.Role
	var bindings []*rbacv1.RoleBinding
	var dep *appsv1.Deployment
	var cfg alfredConfig
	for _, obj := range decode(t, out) {
		switch o := obj.(type) {
		case *rbacv1.Role:
			roles = append(roles, o)
		case *rbacv1.RoleBinding:
			bindings = append(bindings, o)
		case *appsv1.Deployment:
			dep = o
		case *corev1.ConfigMap:
			cfg = configOf(t, o)
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			t.Fatalf("deploy/kubernetes grants nothing cluster-wide: %T", o)
		}
	}
	require.Len(t, roles, 1, "one Role in deploy/kubernetes")
	require.Len(t, bindings, 1, "one RoleBinding in deploy/kubernetes")
	require.NotNil(t, dep)
	role, binding := roles[0], bindings[0]
	require.Equal(t, runsNamespace, role.Namespace, "the Role is in the runs' namespace")
	require.Equal(t, runsNamespace, binding.Namespace)
	require.Equal(t, runsNamespace, cfg.Runner.Kubernetes.Namespace, "Alfred's runtime works where the Role grants")
	require.NotEqual(t, dep.Namespace, role.Namespace, "nothing is granted in Alfred's own namespace")
	granted := map[string][]string{} // "group/resource"
	for _, r := range role.Rules {
		require.Len(t, r.APIGroups, 1, "one API group a rule: %+v", r)
		require.Empty(t, r.ResourceNames)
		for _, res := range r.Resources {
			granted[r.APIGroups[0]+"/"+res] = append(granted[r.APIGroups[0]+"/"+res], r.Verbs...)
		}
	}
	needed := map[string][]string{}
	for _, p := range kubernetes.Access {
		needed[p.Group+"/"+p.Resource] = append(needed[p.Group+"/"+p.Resource], p.Verbs...)
	}
	for _, m := range []map[string][]string{granted, needed} {
		for k := range m {
			slices.Sort(m[k])
		}
	}
	require.Equal(t, needed, granted, "the Role must grant exactly runner/kubernetes.Access")
	require.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}, binding.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: dep.Spec.Template.Spec.ServiceAccountName, Namespace: dep.Namespace}}, binding.Subjects)
	require.Equal(t, "alfred", dep.Spec.Template.Spec.ServiceAccountName)
	require.Equal(t, alfredNamespace, dep.Namespace)
}

// alfredConfig is what the tests read of the alfred.yaml of deploy/kubernetes's ConfigMap.
type alfredConfig struct {
	DataDir string `yaml:"data_dir"`
	Runner  struct {
		UID        int64  `yaml:"uid"`
		GID        int64  `yaml:"gid"`
		Runtime    string `yaml:"runtime"`
		Kubernetes struct {
			Kubeconfig     string `yaml:"kubeconfig"`
			Namespace      string `yaml:"namespace"`
			StateClaim     string `yaml:"state_claim"`
			ServiceAccount string `yaml:"service_account"`
		} `yaml:"kubernetes"`
	} `yaml:"runner"`
}

// configOf reads the alfred.yaml of the ConfigMap cm.
func configOf(tb testing.TB, cm *corev1.ConfigMap) alfredConfig {
	tb.Helper()
	var cfg alfredConfig
	require.NoError(tb, goyaml.Unmarshal([]byte(cm.Data["alfred.yaml"]), &cfg))
	return cfg
}

// TestTwoNamespaces holds the split of deploy/kubernetes: Alfred's Deployment, Service,
// ConfigMap, service account and claim in Alfred's namespace; the runs' service account,
// egress policy and claim in the runs' namespace, which enforces Pod Security restricted
// (latest); and the state as two static ReadWriteMany PersistentVolumes of one source, each
// reserved for the claim of one namespace, which names it back, so that Alfred's Pod and the
// runs' Pods mount the same files.
func TestTwoNamespaces(t *testing.T) {
	out, _ := run(t, "kustomize", manifests(t))
	namespaces := map[string]map[string]string{}
	where := map[string]string{} // "Kind/name" → namespace ("Kind/name@namespace" for the claims)
	var volumes []*corev1.PersistentVolume
	claims := map[string]*corev1.PersistentVolumeClaim{} // namespace → claim
	var cfg alfredConfig
	for _, obj := range decode(t, out) {
		switch o := obj.(type) {
		case *corev1.Namespace:
			namespaces[o.Name] = o.Labels
		case *corev1.PersistentVolume:
			volumes = append(volumes, o)
		case *corev1.PersistentVolumeClaim:
			require.NotContains(t, claims, o.Namespace, "one claim per namespace")
			claims[o.Namespace] = o
		case metav1.Object:
			if cm, ok := o.(*corev1.ConfigMap); ok {
				cfg = configOf(t, cm)
			}
			kind := fmt.Sprintf("%T", o)
			where[kind[strings.LastIndex(kind, ".")+1:]+"/"+o.GetName()] = o.GetNamespace()
		}
	}
	require.Equal(t, []string{alfredNamespace, runsNamespace}, slices.Sorted(maps.Keys(namespaces)))
	require.Equal(t, "restricted", namespaces[runsNamespace]["pod-security.kubernetes.io/enforce"])
	require.Equal(t, "latest", namespaces[runsNamespace]["pod-security.kubernetes.io/enforce-version"])
	for obj, ns := range map[string]string{
		"Deployment/alfred": alfredNamespace, "Service/alfred": alfredNamespace, "ConfigMap/alfred-config": alfredNamespace,
		"ServiceAccount/alfred": alfredNamespace, "ServiceAccount/alfred-run": runsNamespace,
		"Role/alfred-runtime": runsNamespace, "RoleBinding/alfred-runtime": runsNamespace,
		"NetworkPolicy/alfred-runs-egress": runsNamespace,
	} {
		require.Equal(t, ns, where[obj], "the namespace of %s", obj)
	}
	require.Equal(t, runsNamespace, cfg.Runner.Kubernetes.Namespace)

	require.Len(t, volumes, 2)
	require.Equal(t, volumes[0].Spec.PersistentVolumeSource, volumes[1].Spec.PersistentVolumeSource, "both volumes are the one export")
	require.NotNil(t, volumes[0].Spec.NFS, "the example is NFS")
	require.Equal(t, []string{alfredNamespace, runsNamespace}, slices.Sorted(maps.Keys(claims)))
	for _, v := range volumes {
		require.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, v.Spec.AccessModes, v.Name)
		require.Empty(t, v.Spec.StorageClassName, v.Name)
		require.Equal(t, corev1.PersistentVolumeReclaimRetain, v.Spec.PersistentVolumeReclaimPolicy, v.Name)
		require.NotNil(t, v.Spec.ClaimRef, "%s is reserved for a claim", v.Name)
		c := claims[v.Spec.ClaimRef.Namespace]
		require.NotNil(t, c, "%s: a claim in %s", v.Name, v.Spec.ClaimRef.Namespace)
		require.Equal(t, c.Name, v.Spec.ClaimRef.Name, v.Name)
		require.Equal(t, v.Name, c.Spec.VolumeName, "the claim of %s names its volume", c.Namespace)
		require.NotNil(t, c.Spec.StorageClassName, "a static volume: no class, not the cluster's default")
		require.Empty(t, *c.Spec.StorageClassName)
		require.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, c.Spec.AccessModes)
	}
	require.Equal(t, claims[runsNamespace].Name, cfg.Runner.Kubernetes.StateClaim, "the runs mount the runs' claim")
}

// TestManifestsRestricted sends deploy/kubernetes, as rendered and placed in the test's two
// namespaces, to the API server (server-side dry run, nothing is created), the namespaces
// labelled as the manifests label theirs (a dry run keeps no label) and warning of Pod Security
// "restricted": every object is accepted, the NetworkPolicy included (its form only: that the
// test cluster enforces a policy is runner/kubernetes.TestEgressPolicyEnforced), and the
// Deployment's Pod template draws no PodSecurity warning.
// A run's Pod as runner/kubernetes compiles it, with the state claim's sub-paths, is accepted
// in the runs' namespace; a privileged one is refused there.
func TestManifestsRestricted(t *testing.T) {
	kc, cs := kubetest.Kubeconfig(t)
	alfredNS, runsNS := kubetest.Namespace(t, cs), kubetest.Namespace(t, cs)
	ctx := context.Background()
	objects := placed(t, cs, kustomize(t, manifests(t)), alfredNS, runsNS, t.TempDir())
	labelLike(t, cs, objects, "pod-security.kubernetes.io/warn", "restricted")

	out, stderr := apply(t, kc, objects, "--dry-run=server")
	t.Logf("kubectl apply --dry-run=server:\n%s%s", out, stderr)
	for _, want := range []string{"serviceaccount/alfred ", "serviceaccount/alfred-run ", "role.rbac.authorization.k8s.io/alfred-runtime ",
		"rolebinding.rbac.authorization.k8s.io/alfred-runtime ", "configmap/alfred-config ", "service/alfred ",
		"persistentvolume/" + alfredNS + "-state ", "persistentvolume/" + runsNS + "-state ",
		"persistentvolumeclaim/alfred-state ", "deployment.apps/alfred ", "networkpolicy.networking.k8s.io/alfred-runs-egress "} {
		require.Contains(t, out, want+"created (server dry run)")
	}
	require.NotContains(t, stderr, "PodSecurity", "the Deployment's Pod must meet Pod Security restricted")
	// The warning this looks for, on a Deployment that breaks the profile (its Pod on the host
	// network, as the test cluster's overlay puts it).
	over := kustomize(t, overlay(t, "deploy/deploytest/testdata/overlay", "", nil))
	_, stderr = apply(t, kc, placed(t, cs, over, alfredNS, runsNS, t.TempDir()), "--dry-run=server")
	require.Contains(t, stderr, `would violate PodSecurity "restricted:latest": host namespaces (hostNetwork=true)`)

	spec := runner.ContainerSpec{Name: "alfred-run-1", Image: "alfred/agent:1", Cmd: []string{"run"}, User: "65532:65532",
		Env: []string{"ANTHROPIC_API_KEY=x"}, Labels: map[string]string{runner.LabelManaged: "true"},
		Limits: runner.Limits{MemoryBytes: 1 << 30, NanoCPUs: 1e9},
		Mounts: []runner.Mount{{Source: "/var/lib/alfred/worktrees/1", Target: runner.WorkspaceDir},
			{Source: "/var/lib/alfred/runs/alfred-run-1/in", Target: runner.InputDir, ReadOnly: true}}}
	pod, _, err := kubernetes.PodFor(spec, kubernetes.Options{Namespace: runsNS, StateClaim: "alfred-state",
		StateRoot: "/var/lib/alfred"}) // the dry run created no alfred-run: the default account
	require.NoError(t, err)
	_, err = cs.CoreV1().Pods(runsNS).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err, "a run's Pod under Pod Security restricted")

	// The label of the manifests is enforced: a privileged Pod is refused there.
	bad := pod.DeepCopy()
	bad.Spec.Containers[0].SecurityContext.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}
	_, err = cs.CoreV1().Pods(runsNS).Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.ErrorContains(t, err, "violates PodSecurity")
}

// kustomize returns the objects of the kustomization dir as kubectl kustomize renders them.
func kustomize(tb testing.TB, dir string) string {
	tb.Helper()
	out, _ := run(tb, "kustomize", dir)
	return out
}

// labelLike gives the test's namespaces that objects (placed's stream) holds the labels the
// objects give them, plus key=value.
func labelLike(tb testing.TB, cs k8s.Interface, objects, key, value string) {
	tb.Helper()
	ctx := context.Background()
	for _, obj := range decode(tb, objects) {
		want, ok := obj.(*corev1.Namespace)
		if !ok {
			continue
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, want.Name, metav1.GetOptions{})
		require.NoError(tb, err)
		maps.Copy(ns.Labels, want.Labels)
		ns.Labels[key] = value
		_, err = cs.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
		require.NoError(tb, err)
	}
}

// TestDeploymentMatchesConfig holds the Deployment to the alfred.yaml of its ConfigMap: Alfred's
// Pod runs as runner.uid:gid with that fsGroup (so it shares the state's files with the runs'
// Pods), mounts the claim of its namespace at data_dir, and the runs' service account is one
// of the manifests', in the runs' namespace.
func TestDeploymentMatchesConfig(t *testing.T) {
	out, _ := run(t, "kustomize", manifests(t))
	var dep *appsv1.Deployment
	var cfg alfredConfig
	claims := map[string]*corev1.PersistentVolumeClaim{}
	accounts := map[string]string{}
	for _, obj := range decode(t, out) {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			dep = o
		case *corev1.ConfigMap:
			cfg = configOf(t, o)
		case *corev1.PersistentVolumeClaim:
			claims[o.Namespace] = o
		case *corev1.ServiceAccount:
			accounts[o.Name] = o.Namespace
		}
	}
	require.NotNil(t, dep)
	require.Equal(t, "kubernetes", cfg.Runner.Runtime)
	require.Empty(t, cfg.Runner.Kubernetes.Kubeconfig, "in-cluster: the service account")
	require.Equal(t, cfg.Runner.Kubernetes.Namespace, accounts[cfg.Runner.Kubernetes.ServiceAccount],
		"the runs' service account %q, in the runs' namespace", cfg.Runner.Kubernetes.ServiceAccount)
	claim := claims[dep.Namespace]
	require.NotNil(t, claim, "a claim in Alfred's namespace")

	pod := dep.Spec.Template.Spec
	sc := pod.SecurityContext
	require.NotNil(t, sc)
	require.Equal(t, cfg.Runner.UID, *sc.RunAsUser)
	require.Equal(t, cfg.Runner.GID, *sc.RunAsGroup)
	require.Equal(t, cfg.Runner.GID, *sc.FSGroup)
	var stateVolume string
	for _, v := range pod.Volumes {
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim.Name {
			stateVolume = v.Name
		}
	}
	require.NotEmpty(t, stateVolume, "the Pod mounts the state claim")
	for _, c := range append(pod.InitContainers, pod.Containers...) {
		require.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: stateVolume, MountPath: cfg.DataDir}, "%s mounts the claim at data_dir", c.Name)
		require.False(t, c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged, c.Name)
		for _, e := range c.Env {
			require.NotEqual(t, "ALFRED_RUNNER_KUBERNETES_NAMESPACE", e.Name, "%s: the runs' namespace is the ConfigMap's", c.Name)
		}
	}
}

// TestNetworkPolicySelectsRunsOnly: the baseline egress policy selects a run's Pod as
// runner/kubernetes labels it, and not Alfred's own Pod; it denies all ingress and lets out only
// DNS (the allowlist is Alfred's own policy, runner/kubernetes.ApplyEgressPolicy).
func TestNetworkPolicySelectsRunsOnly(t *testing.T) {
	out, _ := run(t, "kustomize", manifests(t))
	var np *networkingv1.NetworkPolicy
	var dep *appsv1.Deployment
	for _, obj := range decode(t, out) {
		switch o := obj.(type) {
		case *networkingv1.NetworkPolicy:
			np = o
		case *appsv1.Deployment:
			dep = o
		}
	}
	require.NotNil(t, np)
	require.NotNil(t, dep)
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	require.NoError(t, err)
	pod, _, err := kubernetes.PodFor(runner.ContainerSpec{Name: "alfred-run-1", Image: "alfred/agent:1", User: "65532:65532",
		Labels: map[string]string{runner.LabelManaged: "true", runner.LabelRun: "1", runner.LabelPhase: "development"}},
		kubernetes.Options{Namespace: "alfred"})
	require.NoError(t, err)
	require.True(t, sel.Matches(labels.Set(pod.Labels)), "a run's Pod is selected")
	require.True(t, sel.Matches(labels.Set{"app": "anything"}), "so is any Pod of the runs' namespace, labelled or not")
	require.NotEqual(t, np.Namespace, dep.Namespace, "Alfred's Pod is in another namespace")
	require.ElementsMatch(t, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}, np.Spec.PolicyTypes)
	require.Empty(t, np.Spec.Ingress)
	require.Len(t, np.Spec.Egress, 1, "DNS only")
	for _, rule := range np.Spec.Egress {
		require.NotEmpty(t, rule.To, "every egress rule names its peers")
		require.NotEmpty(t, rule.Ports, "every egress rule names its ports")
		for _, peer := range rule.To {
			if peer.IPBlock != nil {
				require.NotEqual(t, "0.0.0.0/0", peer.IPBlock.CIDR, "no rule lets everything out")
			}
		}
	}
}
