// Package deploytest tests the manifests of deploy/kubernetes (it holds tests only): rendered
// with kubectl's kustomize, checked against what the Kubernetes runtime needs
// (runner/kubernetes.Access), accepted by the API server under Pod Security "restricted", and
// applied to the test cluster of scripts/test-cluster.sh through the overlay in
// testdata/overlay, where the Alfred they start runs a phase as a Pod of its own service
// account; and `alfred doctor` on that cluster, with and without every verb.
//
// The tests that need the cluster skip without ALFRED_TEST_KUBECONFIG (and fail under CI), as
// runner/kubernetes/kubetest does; those that only render need kubectl (on PATH, or the test
// cluster's build under /var/cache/alfred-k8s).
package deploytest
