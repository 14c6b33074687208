package deploytest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forgetest"
)

// TestDoctorKubernetes runs `alfred doctor` (the binary) on the test cluster with
// runner.runtime: kubernetes, as two service accounts of the test's namespace: one holding the
// Role of deploy/kubernetes without the verb patch on pods, for which the doctor fails and
// names that verb, and one holding the Role as it is, for which every check passes (the state
// claim Bound, a Pod of the agent's image run to completion), with one warning: an agent bound
// to no phase whose image the node does not have.
func TestDoctorKubernetes(t *testing.T) {
	kc, cs := kubetest.Kubeconfig(t)
	kubectl(t)
	ctx := context.Background()
	ns := kubetest.Namespace(t, cs)
	dataDir := t.TempDir()
	kubetest.StateClaim(t, cs, ns, filepath.Join(dataDir, "claim"))
	// The runs' namespace enforces Pod Security restricted, as deploy/kubernetes labels it.
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err)
	if nsObj.Labels == nil {
		nsObj.Labels = map[string]string{}
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	_, err = cs.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	image := runtimetest.BuildImage(t, ctx, runtimetest.Client(t), "alfred-doctortest-script:"+kubetest.RandomHex(t, 4), "../../cmd/alfred-script-agent")
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", image).Run() })
	kubetest.ImportImage(t, image)

	out, _ := run(t, "kustomize", manifests(t))
	var rules []rbacv1.PolicyRule
	for _, obj := range decode(t, out) {
		if r, ok := obj.(*rbacv1.Role); ok {
			rules = r.Rules
		}
	}
	require.NotEmpty(t, rules)
	var partial []rbacv1.PolicyRule
	for _, r := range rules {
		r = *r.DeepCopy()
		if slices.Contains(r.Resources, "pods") {
			r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == "patch" })
		}
		partial = append(partial, r)
	}
	full := serviceAccountKubeconfig(t, cs, kc, ns, "alfred", rules)
	lacking := serviceAccountKubeconfig(t, cs, kc, ns, "alfred-lacking", partial)

	fj := forgetest.NewForgejoServer(t)
	cfg := doctorConfig(t, dataDir, fj, ns, image)
	bin := servetest.Binary(t)
	doctor := func(kubeconfig string) (string, error) { return runDoctor(t, bin, cfg, kubeconfig) }

	out, err = doctor(lacking)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the doctor fails: %v", err)
	require.Contains(t, out, "[FAIL] kubernetes: RBAC pods: missing verb patch on pods in namespace "+ns)
	require.Contains(t, out, "[ok]   kubernetes: RBAC secrets: create, get, list, update, delete allowed")
	require.Contains(t, out, "[ok]   kubernetes: state claim alfred-state: Bound, ReadWriteMany")

	out, err = doctor(full)
	require.NoError(t, err, "every blocking check passes")
	for _, want := range []string{
		"answers; namespace " + ns, // the test cluster's binaries carry no version: v0.0.0-master
		"[ok]   kubernetes: RBAC pods: create, get, list, watch, patch, delete allowed",
		"[ok]   kubernetes: RBAC pods/log: get allowed",
		"[ok]   kubernetes: RBAC secrets: create, get, list, update, delete allowed",
		"[ok]   kubernetes: RBAC persistentvolumeclaims: get allowed",
		"[ok]   kubernetes: RBAC networkpolicies.networking.k8s.io: get, create, update allowed",
		"[ok]   kubernetes: egress: every allowlist entry is an address",
		"[ok]   kubernetes: state claim alfred-state: Bound, ReadWriteMany",
		"[ok]   kubernetes: Pod Security: namespace " + ns + " enforces restricted",
		"[ok]   agent script: image: " + image + " present or pullable: a Pod of it (-version) ran to completion in namespace " + ns,
		"[warn] agent spare: image: alfred-doctortest-missing:none cannot be had on the cluster",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "[FAIL]")
	require.NotContains(t, out, "docker")

	// The doctor's Pods are gone.
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Empty(t, pods.Items)
}

// doctorConfig writes, in dir, the alfred.yaml of a doctor run against the test cluster: the
// forge stand-in fj, runner.runtime kubernetes in namespace ns with the claim
// kubetest.ClaimName (the runs' Pods name the namespace's default service account), the
// script agent's image, and a spare agent bound to no phase whose image the node does not have (a warning).
// data_dir is dir's own, outside the cluster. It returns the file's path.
func doctorConfig(t *testing.T, dir string, fj *forgetest.ForgejoServer, ns, image string) string {
	t.Helper()
	scriptFile := filepath.Join(dir, "script.yaml")
	require.NoError(t, os.WriteFile(scriptFile, []byte(script), 0o644))
	cfg := filepath.Join(dir, "alfred.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`listen: 127.0.0.1:8080
public_url: http://127.0.0.1:8080
data_dir: %s
forges:
  - name: forgejo
    kind: forgejo
    base_url: %s
    token: %s
    webhook_secret: %s
    bot_user: %s
runner:
  runtime: kubernetes
  kubernetes:
    namespace: %s
    state_claim: %s
    pull_policy: Never
agents:
  - name: script
    adapter: script
    image: %s
    script: %s
  - name: spare
    adapter: script
    image: alfred-doctortest-missing:none
    script: %s
phases:
  default: script
`, filepath.Join(dir, "data"), fj.URL, fj.Token, webhookSecret, forgetest.BotLogin, ns, kubetest.ClaimName,
		image, scriptFile, scriptFile)), 0o600))
	return cfg
}

// runDoctor runs `bin doctor --config cfg` with the credentials of kubeconfig and returns its
// output and error (an *exec.ExitError when a check failed).
func runDoctor(t *testing.T, bin, cfg, kubeconfig string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, "doctor", "--config", cfg)
	cmd.Env = append(os.Environ(), "ALFRED_RUNNER_KUBERNETES_KUBECONFIG="+kubeconfig,
		"ALFRED_RUNNER_KUBERNETES_EGRESS_GATE_IMAGE=alfred-doctortest-gate:none") // required with the allowlist
	out, err := cmd.CombinedOutput()
	t.Logf("alfred doctor as %s:\n%s", filepath.Base(kubeconfig), out)
	return string(out), err
}

// serviceAccountKubeconfig creates the service account name in ns with a Role of rules bound to
// it, and returns the path of a kubeconfig with a token of it for the cluster of admin.
func serviceAccountKubeconfig(t *testing.T, cs k8s.Interface, admin, ns, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tokenKubeconfig(t, cs, admin, ns, name)
}

// tokenKubeconfig returns the path of a kubeconfig with a token of the service account name of
// ns, for the cluster of the kubeconfig admin.
func tokenKubeconfig(t *testing.T, cs k8s.Interface, admin, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	hour := int64(3600)
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	require.NoError(t, err)

	adm, err := clientcmd.LoadFromFile(admin)
	require.NoError(t, err)
	cluster := adm.Clusters[adm.Contexts[adm.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = cluster
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name, Namespace: ns}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}
