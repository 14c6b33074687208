// Package kubetest holds the test helpers of the Kubernetes runtime on the real test cluster
// of scripts/test-cluster.sh (spec/kubernetes.md, "The test cluster"): a clientset, a namespace
// per test, a state claim backed by a test's own directory, and images imported into the
// cluster's containerd (no registry is reachable).
//
// Every helper skips the test loudly when ALFRED_TEST_KUBECONFIG is unset or the cluster does
// not answer, and fails it instead when CI is set, as runtimetest.Client does for Docker: one
// rule, Unavailable, which the other tests of the cluster (deploy/deploytest) call too.
package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/alfred-bot/alfred/runner/kubernetes"
	"github.com/alfred-bot/alfred/runner/runtimetest"
)

// KubeconfigEnv names the variable holding the path of the test cluster's kubeconfig
// (scripts/test-cluster.sh up prints it; make test exports it).
const KubeconfigEnv = "ALFRED_TEST_KUBECONFIG"

// ClaimName is the name of the state claim StateClaim creates in a test's namespace.
const ClaimName = "alfred-state"

// Kubeconfig returns the test cluster's kubeconfig path and a clientset on it, after checking
// that the API server answers; it skips the test (fails it under CI) otherwise.
func Kubeconfig(tb testing.TB) (string, *k8s.Clientset) {
	tb.Helper()
	path := os.Getenv(KubeconfigEnv)
	var cs *k8s.Clientset
	var err error
	if path == "" {
		err = errString(KubeconfigEnv + " is not set")
	} else if cs, err = kubernetes.NewClientset(path); err == nil {
		_, err = cs.Discovery().ServerVersion()
	}
	if err != nil {
		Unavailable(tb, "no test cluster (%v). Start one with scripts/test-cluster.sh up and set %s", err, KubeconfigEnv)
	}
	return path, cs
}

// Unavailable ends a test that needs the test cluster or its tools when they are missing,
// the one rule for every such test: without CI it skips, loudly, with the reason and the fix
// (format and args); with CI set it fails, since CI must run every test.
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	why := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "" {
		tb.Skipf("!!! SKIPPING KUBERNETES TEST %s: %s; set CI=1 to turn this into a failure. !!!", tb.Name(), why)
	}
	tb.Fatalf("Kubernetes test cluster required (CI is set): %s", why)
}

// Kubectl returns the path of a kubectl: on PATH, else the one scripts/test-cluster.sh built
// under /var/cache/alfred-k8s. Without one the test ends by Unavailable.
func Kubectl(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	if matches, _ := filepath.Glob("/var/cache/alfred-k8s/*/bin/kubectl"); len(matches) > 0 {
		return matches[len(matches)-1]
	}
	Unavailable(tb, "no kubectl on PATH or under /var/cache/alfred-k8s (scripts/test-cluster.sh up builds one)")
	return ""
}

// Namespace creates a namespace of the test's own ("alfred-test-<random>") and deletes it
// (with everything in it) when the test ends.
func Namespace(tb testing.TB, cs k8s.Interface) string {
	tb.Helper()
	ns := "alfred-test-" + RandomHex(tb, 5)
	_, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	return ns
}

// StateClaim creates, for a test's Alfred whose data_dir is dir (absolute), the state claim
// ClaimName in ns, bound to a PersistentVolume of the test's own backed by dir itself: on the
// single-node test cluster the node is this machine, so the PersistentVolume is the hostPath
// dir (ReadWriteMany, no StorageClass), as a ReadWriteMany claim on a real cluster is a
// network file system both Alfred and the runs' Pods mount. It returns once the claim is
// Bound (a Pod on a Pending claim waits for the scheduler's back-off). The PersistentVolume
// is deleted when the test ends; the claim goes with the namespace.
func StateClaim(tb testing.TB, cs k8s.Interface, ns, dir string) string {
	tb.Helper()
	require.True(tb, filepath.IsAbs(dir), "the state root must be absolute: %s", dir)
	require.NoError(tb, os.MkdirAll(dir, 0o755))
	ctx := context.Background()
	pvName := ns + "-state"
	empty := ""
	dirType := corev1.HostPathDirectory
	size := resource.MustParse("1Gi")
	_, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Labels: map[string]string{"alfred.test": ns}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              empty,
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: ClaimName},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}},
		},
	}, metav1.CreateOptions{})
	require.NoError(tb, err)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cs.CoreV1().PersistentVolumes().Delete(ctx, pvName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			tb.Errorf("delete persistent volume %s: %v", pvName, err)
		}
	})
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: ClaimName},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &empty,
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}, metav1.CreateOptions{})
	require.NoError(tb, err)
	WaitBound(tb, cs, ns)
	return ClaimName
}

// WaitBound waits until the claim ClaimName of ns is Bound. A Pod naming a claim still
// Pending is not scheduled, and the scheduler tries it again only after a back-off of seconds:
// a test's first run would wait for it.
func WaitBound(tb testing.TB, cs k8s.Interface, ns string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	claims := cs.CoreV1().PersistentVolumeClaims(ns)
	for {
		c, err := claims.Get(ctx, ClaimName, metav1.GetOptions{})
		require.NoError(tb, err, "the state claim %s/%s never bound", ns, ClaimName)
		if c.Status.Phase == corev1.ClaimBound {
			tb.Logf("state claim %s/%s bound after %s", ns, ClaimName, time.Since(start).Round(time.Millisecond))
			return
		}
		w, err := claims.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + ClaimName, ResourceVersion: c.ResourceVersion})
		require.NoError(tb, err, "watch the state claim %s/%s", ns, ClaimName)
		for ev := range w.ResultChan() {
			if c, ok := ev.Object.(*corev1.PersistentVolumeClaim); ok && c.Status.Phase == corev1.ClaimBound {
				break
			}
		}
		w.Stop() // closed by the server, by ctx, or bound: read it again
	}
}

// ImportImage imports the Docker image tag into the test cluster's containerd
// (scripts/test-cluster.sh import, which returns once the kubelet can run it) and forgets it
// when the test ends. A test that failed logs first what the cluster knew of the image then
// (scripts/test-cluster.sh report: containerd's record, the CRI plugin's events, the kubelet's
// image garbage collection), so that a Pod's ErrImageNeverPull names its cause.
func ImportImage(tb testing.TB, tag string) {
	tb.Helper()
	out, err := clusterScript(tb, "import", tag)
	require.NoError(tb, err, "import %s into the test cluster: %s", tag, out)
	tb.Cleanup(func() {
		if out, err := clusterScript(tb, "forget", tag); err != nil {
			tb.Errorf("remove %s from the test cluster: %v: %s", tag, err, out)
		}
	})
	tb.Cleanup(func() { // before the forget above: cleanups run last registered first
		if tb.Failed() {
			tb.Logf("the test cluster's view of %s:\n%s", tag, Report(tb, tag))
		}
	})
}

// Report returns what the test cluster knows of the Docker image tags (scripts/test-cluster.sh
// report): for each, "== <containerd's reference>", then "containerd: <digest> <labels>" or
// "containerd: no such image", and the CRI plugin's last events and errors naming it; then the
// kubelet's last image garbage collections and evictions. A failure to run the script is in
// the text, not fatal: it is a diagnostic.
func Report(tb testing.TB, tags ...string) string {
	tb.Helper()
	out, err := clusterScript(tb, append([]string{"report"}, tags...)...)
	if err != nil {
		return fmt.Sprintf("%s(test-cluster.sh report: %v)", out, err)
	}
	return string(out)
}

// clusterScript runs scripts/test-cluster.sh with args and returns its combined output.
func clusterScript(tb testing.TB, args ...string) ([]byte, error) {
	tb.Helper()
	script := filepath.Join(RepoRoot(tb), "scripts", "test-cluster.sh")
	return exec.Command("bash", append([]string{script}, args...)...).CombinedOutput()
}

// RepoRoot returns the repository's root: the nearest directory above the working directory
// holding go.mod.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	require.NoError(tb, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(tb, parent, dir, "no go.mod above the working directory")
		dir = parent
	}
}

// RandomHex returns n random bytes in hex: names of a test's own.
func RandomHex(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(tb, err)
	return hex.EncodeToString(b)
}

type errString string

func (e errString) Error() string { return string(e) }

// NodeAddress returns the InternalIP of the test cluster's one node: this machine's own
// address, the one a run's Pod reaches this machine at (its traffic to it crosses the node's
// INPUT chain, where the cluster's NetworkPolicy firewall filters it, unlike loopback, which a
// Pod's network namespace has to itself). A test serves there what a Pod must reach.
func NodeAddress(tb testing.TB, cs k8s.Interface) string {
	tb.Helper()
	nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(tb, err)
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return a.Address
			}
		}
	}
	tb.Fatalf("the test cluster's node reports no InternalIP")
	return ""
}

// GatePackage is the import path of the egress gate alone (testdata/egressgate: the code of
// `alfred egress-gate` in a 3 MB binary instead of Alfred's whole one), the tests' gate image.
const GatePackage = "github.com/alfred-bot/alfred/runner/kubernetes/kubetest/testdata/egressgate"

// GateImage builds the gate image of GatePackage once for the test process (a tag of the
// test's own on it, removed when the test ends; the package's TestMain calls
// runtimetest.RemoveImagesBuiltOnce) and imports it into the test cluster: the image of
// kubernetes.EgressGate for a test's run Pods.
func GateImage(tb testing.TB) string {
	tb.Helper()
	tag := runtimetest.BuildImageOnce(tb, context.Background(), runtimetest.Client(tb), "alfred-test/egress-gate:"+RandomHex(tb, 4), GatePackage)
	ImportImage(tb, tag)
	return tag
}
