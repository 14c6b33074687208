package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/alfred-bot/alfred/internal/base/servetest"
	"github.com/alfred-bot/alfred/runner"
	"github.com/alfred-bot/alfred/runner/kubernetes/kubetest"
	"github.com/alfred-bot/alfred/runner/runtimetest"
	"github.com/alfred-bot/alfred/webhook/forge"
	"github.com/alfred-bot/alfred/webhook/forgejo"
	"github.com/alfred-bot/alfred/webhook/forgetest"
	"github.com/alfred-bot/alfred/webhook/forgetest/recorded"
)

// The runs' user of deploy/kubernetes (runner.uid, runner.gid and Alfred's Pod's runAsUser).
const runUser = 65532

// webhookSecret signs the test's deliveries.
const webhookSecret = "deploytest-webhook-secret"

// script is the script agent's scenario: the functional analysis asks one question.
const script = `
analysis.functional:
  summary: Understood.
  understanding: You want the report exported as a CSV file.
  questions:
    - id: q1
      title: Which separator?
      context: Spreadsheets in some locales expect semicolons.
      options:
        - {id: a, label: Comma, description: RFC 4180}
        - {id: b, label: Semicolon, description: what Excel expects in Europe}
      default: a
  expected_behaviour: An Export button downloads report.csv.
  acceptance_criteria: [the file opens in a spreadsheet]
  out_of_scope: [PDF export]
`

// TestDeployRunsPhaseAsPod applies deploy/kubernetes to the test cluster (kubectl apply,
// through testdata/overlay and an overlay of the test's own, the objects placed in two
// namespaces of the test's own and on two hostPath PersistentVolumes of one directory), which
// starts Alfred in its Deployment's Pod with the in-cluster service account "alfred" of
// Alfred's namespace; a signed delivery assigns an issue of the forge stand-in, and Alfred
// runs the functional analysis as a Pod in the runs' namespace, which enforces Pod Security
// restricted as the manifests label it. The run writes its result on the runs' claim, Alfred
// reads it through its own claim (the other volume on the same directory): the question is
// posted on the issue.
//
// The run's Pod is Alfred's service account's work, not the test's: a ValidatingAdmissionPolicy
// of the test's own refuses, in the runs' namespace, every Pod labelled alfred.managed=true
// whose creator is not system:serviceaccount:<Alfred's namespace>:alfred (the test's
// administrator is refused one, as a check of the policy itself).
//
// Then the boundaries of the two namespaces: Alfred's service account may not read a Secret of
// its own namespace (a SubjectAccessReview; it may in the runs', as the review's own check);
// `alfred doctor` with its token passes, and fails, naming the label, once the runs'
// namespace no longer enforces restricted.
func TestDeployRunsPhaseAsPod(t *testing.T) {
	kc, cs := kubetest.Kubeconfig(t)
	kubectl(t)
	ctx := context.Background()
	alfredNS, runsNS := kubetest.Namespace(t, cs), kubetest.Namespace(t, cs)
	onlyAlfredCreatesRuns(t, cs, runsNS, alfredNS)

	// Images: Alfred's from scripts/alfred-image.sh (Debian with git, built here), and the
	// script agent's; both imported into the node.
	tag := kubetest.RandomHex(t, 4)
	alfredImage := "alfred-deploytest:" + tag
	began := time.Now()
	// The binary the other tests run (servetest.Binary, static), not a build of its own.
	build := exec.Command("bash", filepath.Join(kubetest.RepoRoot(t), "scripts", "alfred-image.sh"), alfredImage)
	build.Env = append(os.Environ(), "ALFRED_BINARY="+servetest.Binary(t))
	out, err := build.CombinedOutput()
	require.NoError(t, err, "scripts/alfred-image.sh: %s", out)
	t.Logf("alfred image %s built in %s", alfredImage, time.Since(began).Round(time.Second))
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", alfredImage).Run() })
	kubetest.ImportImage(t, alfredImage)
	agentImage := runtimetest.BuildImage(t, ctx, runtimetest.Client(t), "alfred-deploytest-script:"+tag, "../../cmd/alfred-script-agent")
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", agentImage).Run() })
	kubetest.ImportImage(t, agentImage)

	// The state's files: a directory of the test's own, which on this single-node cluster the
	// node mounts as it is, for both volumes. The forge's repository lives in it too, at the
	// path Alfred's Pod sees it (its clone URL).
	state := t.TempDir()
	require.NoError(t, os.Chmod(state, 0o755))
	bare := filepath.Join(state, "forge", "sandbox.git")
	forgetest.SeedBareRepo(t, bare)
	chownTree(t, state, runUser)

	fj := forgetest.NewForgejoServer(t)
	repo := "acceptance/sandbox"
	issue := forgetest.SeedAcceptance(t, fj, "forgejo", repo, "/var/lib/alfred/forge/sandbox.git", "type::task")

	port := freePort(t)
	alfredYAML := fmt.Sprintf(`listen: ":%d"
data_dir: /var/lib/alfred
forges:
  - name: forgejo
    kind: forgejo
    base_url: %s
    token_file: /run/secrets/alfred/forgejo_token
    webhook_secret_file: /run/secrets/alfred/forgejo_webhook_secret
    bot_user: bot
workers:
  count: 1
  poll_interval: 200ms
runner:
  uid: %d
  gid: %d
  timeout: 5m
  runtime: kubernetes
  kubernetes:
    requests: {cpu: 50m, memory: 64Mi}  # the limits (a core, 2 GiB) reserved would leave the tests beside little room on the node
    namespace: %s
    state_claim: alfred-state
    pull_policy: Never
    service_account: alfred-run
    egress_gate_image: %s   # Alfred's own image: alfred egress-gate
agents:
  - name: script
    adapter: script
    image: %s
    script: /etc/alfred/script.yaml
phases:
  default: script
`, port, fj.URL, runUser, runUser, runsNS, alfredImage, agentImage)
	dir := overlay(t, "deploy/deploytest/testdata/overlay", fmt.Sprintf(`images:
  - name: alfred
    newName: alfred-deploytest
    newTag: %q
configMapGenerator:
  - name: alfred-config
    namespace: %s
    behavior: replace
    files: [alfred.yaml, script.yaml]
secretGenerator:
  - name: alfred-secrets
    namespace: %s
    files: [forgejo_token, forgejo_webhook_secret]
generatorOptions:
  disableNameSuffixHash: true
patches:
  - target: { kind: Deployment, name: alfred }
    patch: |
      - op: replace
        path: /spec/template/spec/containers/0/ports/0/containerPort
        value: %d
`, tag, alfredNamespace, alfredNamespace, port), map[string]string{"alfred.yaml": alfredYAML, "script.yaml": script,
		"forgejo_token": fj.Token, "forgejo_webhook_secret": webhookSecret})
	objects := placed(t, cs, kustomize(t, dir), alfredNS, runsNS, state)
	applied := time.Now()
	out2, stderr := apply(t, kc, objects)
	t.Logf("kubectl apply:\n%s%s", out2, stderr)
	t.Cleanup(func() {
		if t.Failed() {
			o, _ := exec.Command(kubectl(t), "--kubeconfig", kc, "-n", alfredNS, "logs", "deploy/alfred", "--all-containers", "--tail=200").CombinedOutput()
			t.Logf("alfred's logs:\n%s", o)
			for _, ns := range []string{alfredNS, runsNS} {
				o, _ = exec.Command(kubectl(t), "--kubeconfig", kc, "-n", ns, "get", "pods,pvc,events", "-o", "wide").CombinedOutput()
				t.Logf("namespace %s:\n%s", ns, o)
			}
		}
	})

	// Both claims bind to their volumes (the runs' first Pod would otherwise wait for the
	// scheduler's back-off), each to its own.
	for _, ns := range []string{alfredNS, runsNS} {
		kubetest.WaitBound(t, cs, ns)
		c, err := cs.CoreV1().PersistentVolumeClaims(ns).Get(ctx, kubetest.ClaimName, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, ns+"-state", c.Spec.VolumeName, "the claim of %s", ns)
	}

	// Alfred answers once its store is open and the runtime has read the runs' state claim.
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitReady(t, base+"/readyz", 5*time.Minute)
	t.Logf("kubectl apply to Alfred ready: %s", time.Since(applied).Round(100*time.Millisecond))

	// Deliver the assignment, then wait for the first run Pod of the runs' namespace.
	delivered := time.Now()
	require.Equal(t, http.StatusAccepted, deliver(t, base+"/webhooks/forgejo"))

	run := firstPod(t, cs, runsNS, runner.LabelManaged+"=true", 5*time.Minute)
	t.Logf("run pod %s/%s (service account %s, phase label %s) created %s after the delivery", run.Namespace, run.Name,
		run.Spec.ServiceAccountName, run.Labels[runner.LabelPhase], time.Since(delivered).Round(100*time.Millisecond))
	require.Equal(t, runsNS, run.Namespace)
	require.Equal(t, "analysis", run.Labels[runner.LabelPhase])
	require.Equal(t, "alfred-run", run.Spec.ServiceAccountName)
	require.NotNil(t, run.Spec.AutomountServiceAccountToken)
	require.False(t, *run.Spec.AutomountServiceAccountToken)
	nsObj, err := cs.CoreV1().Namespaces().Get(ctx, runsNS, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "restricted", nsObj.Labels["pod-security.kubernetes.io/enforce"], "the manifests label the runs' namespace")
	require.Equal(t, []string{"alfred-state"}, claimsOf(run.Spec), "the run mounts the runs' claim")

	// Alfred's Pod mounts the claim of its own namespace, bound to the other volume.
	alfredPods, err := cs.CoreV1().Pods(alfredNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=server"})
	require.NoError(t, err)
	require.Len(t, alfredPods.Items, 1)
	require.Equal(t, []string{"alfred-state"}, claimsOf(alfredPods.Items[0].Spec))

	// The result came back through the claims: the run wrote it on the runs' claim, Alfred read
	// it on its own, and the question is on the issue.
	require.Eventually(t, func() bool {
		for _, c := range fj.IssueComments(issue) {
			if strings.Contains(c.Body, "### q1. Which separator?") {
				return true
			}
		}
		return false
	}, 5*time.Minute, 200*time.Millisecond, "no question block; labels %v", fj.IssueLabels(issue))
	t.Logf("delivery to the question posted: %s", time.Since(delivered).Round(100*time.Millisecond))

	// Alfred's account: nothing of its own namespace's Secrets, its verbs in the runs'.
	alfred := "system:serviceaccount:" + alfredNS + ":alfred"
	for _, verb := range []string{"get", "list", "watch"} {
		require.False(t, allowed(t, cs, alfred, alfredNS, verb, "secrets"), "%s may %s secrets in its own namespace", alfred, verb)
	}
	require.False(t, allowed(t, cs, alfred, alfredNS, "create", "pods"), "%s may create pods in its own namespace", alfred)
	require.True(t, allowed(t, cs, alfred, runsNS, "get", "secrets"), "%s may get the runs' secrets", alfred)

	// The doctor, with Alfred's own credentials, against the runs' namespace.
	token := tokenKubeconfig(t, cs, kc, alfredNS, "alfred")
	cfg := doctorConfig(t, t.TempDir(), fj, runsNS, agentImage)
	bin := servetest.Binary(t)
	out3, err := runDoctor(t, bin, cfg, token)
	require.NoError(t, err, "every blocking check passes")
	require.Contains(t, out3, "[ok]   kubernetes: RBAC secrets: create, get, list, update, delete allowed")
	require.Contains(t, out3, "[ok]   kubernetes: state claim alfred-state: Bound, ReadWriteMany")
	require.Contains(t, out3, "[ok]   kubernetes: Pod Security: namespace "+runsNS+" enforces restricted")
	require.NotContains(t, out3, "[FAIL]")

	nsObj, err = cs.CoreV1().Namespaces().Get(ctx, runsNS, metav1.GetOptions{})
	require.NoError(t, err)
	delete(nsObj.Labels, "pod-security.kubernetes.io/enforce")
	_, err = cs.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{})
	require.NoError(t, err)
	out3, err = runDoctor(t, bin, cfg, token)
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the doctor fails without the label: %v", err)
	require.Contains(t, out3, "[FAIL] kubernetes: Pod Security: namespace "+runsNS+" does not enforce the restricted profile")
	require.Contains(t, out3, "pod-security.kubernetes.io/enforce=restricted")
}

// claimsOf returns the claims the Pod spec's volumes name.
func claimsOf(spec corev1.PodSpec) []string {
	var claims []string
	for _, v := range spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims = append(claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return claims
}

// allowed asks the API server (a SubjectAccessReview, as the test's administrator) whether the
// service account user ("system:serviceaccount:<namespace>:<name>") may do verb on resource in
// ns.
func allowed(t *testing.T, cs k8s.Interface, user, ns, verb, resource string) bool {
	t.Helper()
	saNS := strings.Split(user, ":")[2]
	r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), &authv1.SubjectAccessReview{
		Spec: authv1.SubjectAccessReviewSpec{User: user,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + saNS, "system:authenticated"},
			ResourceAttributes: &authv1.ResourceAttributes{Namespace: ns, Verb: verb, Resource: resource}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return r.Status.Allowed
}

// onlyAlfredCreatesRuns makes the API server refuse, in ns, a Pod labelled alfred.managed=true
// created by anyone but the service account alfred of alfredNS; it checks that the test's own
// administrator is refused one.
func onlyAlfredCreatesRuns(t *testing.T, cs k8s.Interface, ns, alfredNS string) {
	t.Helper()
	ctx := context.Background()
	name := ns + "-runs-by-alfred"
	fail := admissionregistrationv1.Fail
	_, err := cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("request.userInfo.username == 'system:serviceaccount:%s:alfred'", alfredNS),
				Message:    "only Alfred's service account creates run Pods here",
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
				ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{runner.LabelManaged: "true"}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = cs.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{})
	})
	// The policy takes effect once kube-apiserver has loaded it: until the administrator's
	// Pod is refused (a dry run, nothing is created).
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "admin-probe", Labels: map[string]string{runner.LabelManaged: "true"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	var last error
	require.Eventually(t, func() bool {
		_, last = cs.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), "only Alfred's service account")
	}, 2*time.Minute, 250*time.Millisecond, "the administrator's run Pod was never refused (last: %v)", last)
}

// chownTree gives dir and everything in it to uid:uid (the runs' user), as a state claim's
// volume is Alfred's; the test runs as root.
func chownTree(t *testing.T, dir string, uid int) {
	t.Helper()
	require.NoError(t, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	}))
}

// freePort returns a TCP port free on this host now (Alfred's Pod listens on it, on the host
// network).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitReady waits until url answers 200.
func waitReady(t *testing.T, url string, within time.Duration) {
	t.Helper()
	var last string
	require.Eventually(t, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(b))
		return resp.StatusCode == http.StatusOK
	}, within, 500*time.Millisecond, "alfred never ready at %s (last: %s)", url, last)
}

// deliver posts the recorded Forgejo assignment of issue #1 to url, re-signed with the test's
// secret under a new delivery id, and returns the status code.
func deliver(t *testing.T, url string) int {
	t.Helper()
	h, body, err := recorded.Load(filepath.Join(forgetest.FixtureDir(t, forge.KindForgejo), "forgejo-live", "002-issue_assign-assigned.json"))
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(body, &doc))
	doc["issue"].(map[string]any)["labels"] = []any{map[string]any{"id": 100, "name": "type::task", "color": "ededed", "exclusive": false}}
	body, err = json.Marshal(doc)
	require.NoError(t, err)
	sig := forgejo.Sign(webhookSecret, body)
	id := uuid.NewString()
	for _, k := range []string{"X-Forgejo-Signature", "X-Gitea-Signature", "X-Gogs-Signature"} {
		h.Set(k, sig)
	}
	for _, k := range []string{"X-Forgejo-Delivery", "X-Gitea-Delivery", "X-Gogs-Delivery", "X-GitHub-Delivery"} {
		h.Set(k, id)
	}
	h.Del("X-Hub-Signature")
	h.Del("X-Hub-Signature-256")
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	for k, vs := range h {
		if k != "Content-Length" && k != "Host" {
			req.Header[k] = vs
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	t.Logf("POST assignment → %d %s", resp.StatusCode, bytes.TrimSpace(b))
	return resp.StatusCode
}

// firstPod returns the first Pod of namespace ns that selector matches, as the API server
// shows it: a list, then a watch from the list's version until a Pod is added. The API server
// may end a watch at any time (its timeout, a restart, load), so a closed watch is followed by
// a new list and watch, which miss nothing in between.
func firstPod(t *testing.T, cs k8s.Interface, ns, selector string, within time.Duration) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	pods := cs.CoreV1().Pods(ns)
	for {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
		require.NoError(t, err, "no run Pod within %s", within)
		if len(list.Items) > 0 {
			return &list.Items[0]
		}
		w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: list.ResourceVersion})
		require.NoError(t, err, "no run Pod within %s", within)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				w.Stop()
				return p
			}
		}
		w.Stop()
		require.NoError(t, ctx.Err(), "no run Pod within %s", within)
	}
}
