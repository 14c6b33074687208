package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	goyaml "github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/yaml"
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
// kustomization directory, given relative to the repository root) in namespace ns, with more
// (YAML lines of a Kustomization) and files (name → content) beside it; it returns the
// directory.
func overlay(tb testing.TB, base, ns, more string, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	// kustomize takes no absolute path to a base, and refuses one that contains the overlay.
	rel, err := filepath.Rel(dir, filepath.Join(kubetest.RepoRoot(tb), base))
	require.NoError(tb, err)
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: " + ns +
		"\nresources:\n  - " + rel + "\n" + more
	require.NoError(tb, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	for name, content := range files {
		require.NoError(tb, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	return dir
}

// TestRoleIsRuntimeAccess holds the Role of deploy/kubernetes equal to
// runner/kubernetes.Access, the verbs the runtime's code uses (which `alfred doctor` checks):
// a verb the code starts using fails here until the Role grants it, and a verb granted but not
// used fails too. The RoleBinding gives the Role to the service account the Deployment runs
// as, in the same namespace.
func TestRoleIsRuntimeAccess(t *testing.T) {
	out, _ := run(t, "kustomize", manifests(t))
	var role *rbacv1.Role
	var binding *rbacv1.RoleBinding
	var deploymentSA string
	for _, obj := range decode(t, out) {
		switch o := obj.(type) {
		case *rbacv1.Role:
			role = o
		case *rbacv1.RoleBinding:
			binding = o
		case *appsv1.Deployment:
			deploymentSA = o.Spec.Template.Spec.ServiceAccountName
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			t.Fatalf("deploy/kubernetes grants nothing cluster-wide: %T", o)
		}
	}
	require.NotNil(t, role, "no Role in deploy/kubernetes")
	require.NotNil(t, binding, "no RoleBinding in deploy/kubernetes")
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
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: deploymentSA, Namespace: binding.Namespace}}, binding.Subjects)
	require.Equal(t, "alfred", deploymentSA)
}

// TestManifestsRestricted sends deploy/kubernetes, as rendered, to the API server (server-side
// dry run, nothing is created) in a namespace enforcing Pod Security "restricted": every object
// is accepted, the NetworkPolicy included (its form only: that the test cluster enforces a
// policy is runner/kubernetes.TestEgressPolicyEnforced), and the Deployment's Pod template
// draws no PodSecurity warning.
// A run's Pod as runner/kubernetes compiles it, with the state claim's sub-paths, is accepted
// under the same profile.
func TestManifestsRestricted(t *testing.T) {
	kc, cs := kubetest.Kubeconfig(t)
	ns := kubetest.Namespace(t, cs)
	ctx := context.Background()
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsObj.Labels["pod-security.kubernetes.io/warn"] = "restricted"
	_, err = cs.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)

	dir := overlay(t, "deploy/kubernetes", ns, "", nil)
	out, stderr := run(t, "--kubeconfig", kc, "apply", "--dry-run=server", "-k", dir)
	t.Logf("kubectl apply --dry-run=server:\n%s%s", out, stderr)
	for _, want := range []string{"serviceaccount/alfred ", "serviceaccount/alfred-run ", "role.rbac.authorization.k8s.io/alfred-runtime ",
		"rolebinding.rbac.authorization.k8s.io/alfred-runtime ", "configmap/alfred-config ", "service/alfred ",
		"persistentvolumeclaim/alfred-state ", "deployment.apps/alfred ", "networkpolicy.networking.k8s.io/alfred-runs-egress "} {
		require.Contains(t, out, want+"created (server dry run)")
	}
	require.NotContains(t, stderr, "PodSecurity", "the Deployment's Pod must meet Pod Security restricted")
	// The warning this looks for, on a Deployment that breaks the profile (its Pod on the host
	// network, as the test cluster's overlay puts it).
	dir = overlay(t, "deploy/deploytest/testdata/overlay", ns, "", nil)
	_, stderr = run(t, "--kubeconfig", kc, "apply", "--dry-run=server", "-k", dir)
	require.Contains(t, stderr, `would violate PodSecurity "restricted:latest": host namespaces (hostNetwork=true)`)

	spec := runner.ContainerSpec{Name: "alfred-run-1", Image: "alfred/agent:1", Cmd: []string{"run"}, User: "65532:65532",
		Env: []string{"ANTHROPIC_API_KEY=x"}, Labels: map[string]string{runner.LabelManaged: "true"},
		Limits: runner.Limits{MemoryBytes: 1 << 30, NanoCPUs: 1e9},
		Mounts: []runner.Mount{{Source: "/var/lib/alfred/worktrees/1", Target: runner.WorkspaceDir},
			{Source: "/var/lib/alfred/runs/alfred-run-1/in", Target: runner.InputDir, ReadOnly: true}}}
	pod, _, err := kubernetes.PodFor(spec, kubernetes.Options{Namespace: ns, StateClaim: "alfred-state",
		StateRoot: "/var/lib/alfred"}) // the dry run created no alfred-run: the default account
	require.NoError(t, err)
	_, err = cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.NoError(t, err, "a run's Pod under Pod Security restricted")

	// The policy's check that runs under restricted at all: a privileged Pod is refused there.
	bad := pod.DeepCopy()
	bad.Spec.Containers[0].SecurityContext.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}
	_, err = cs.CoreV1().Pods(ns).Create(ctx, bad, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	require.ErrorContains(t, err, "violates PodSecurity")
}

// TestDeploymentMatchesConfig holds the Deployment to the alfred.yaml of its ConfigMap: Alfred's
// Pod runs as runner.uid:gid with that fsGroup (so it shares the state claim's files with the
// runs' Pods), mounts runner.kubernetes.state_claim at data_dir, and the runs' service account
// is one of the manifests'.
func TestDeploymentMatchesConfig(t *testing.T) {
	out, _ := run(t, "kustomize", manifests(t))
	var dep *appsv1.Deployment
	var cm *corev1.ConfigMap
	var claim *corev1.PersistentVolumeClaim
	accounts := map[string]bool{}
	for _, obj := range decode(t, out) {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			dep = o
		case *corev1.ConfigMap:
			cm = o
		case *corev1.PersistentVolumeClaim:
			claim = o
		case *corev1.ServiceAccount:
			accounts[o.Name] = true
		}
	}
	require.NotNil(t, dep)
	require.NotNil(t, cm)
	require.NotNil(t, claim)
	var cfg struct {
		DataDir string `yaml:"data_dir"`
		Runner  struct {
			UID        int64  `yaml:"uid"`
			GID        int64  `yaml:"gid"`
			Runtime    string `yaml:"runtime"`
			Kubernetes struct {
				Kubeconfig     string `yaml:"kubeconfig"`
				StateClaim     string `yaml:"state_claim"`
				ServiceAccount string `yaml:"service_account"`
			} `yaml:"kubernetes"`
		} `yaml:"runner"`
	}
	require.NoError(t, goyaml.Unmarshal([]byte(cm.Data["alfred.yaml"]), &cfg))
	require.Equal(t, "kubernetes", cfg.Runner.Runtime)
	require.Empty(t, cfg.Runner.Kubernetes.Kubeconfig, "in-cluster: the service account")
	require.True(t, accounts[cfg.Runner.Kubernetes.ServiceAccount], "the runs' service account %q", cfg.Runner.Kubernetes.ServiceAccount)
	require.Equal(t, claim.Name, cfg.Runner.Kubernetes.StateClaim)
	require.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, claim.Spec.AccessModes)

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
	require.False(t, sel.Matches(labels.Set(dep.Spec.Template.Labels)), "Alfred's Pod is not selected")
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
