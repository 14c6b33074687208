// Package deploytest tests the manifests of deploy/kubernetes (it holds tests only): rendered
// with kubectl's kustomize, checked against what the Kubernetes runtime needs
// (runner/kubernetes.Access), split in two namespaces (Alfred's, and the runs' enforcing Pod
// Security "restricted"), accepted by the API server under that profile, and applied to the
// test cluster of scripts/test-cluster.sh through the overlay in testdata/overlay, placed in
// two namespaces of the test's own, where the Alfred they start runs a phase as a Pod of its
// own service account in the runs' namespace; and `alfred doctor` on that cluster, with and
// without every verb and the label.
//
// The tests that need the cluster skip without ALFRED_TEST_KUBECONFIG (and fail under CI), as
// runner/kubernetes/kubetest does; those that only render need kubectl (on PATH, or the test
// cluster's build under /var/cache/alfred-k8s).
package deploytest
