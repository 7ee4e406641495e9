// Package k8s holds the tests that run against a real Kubernetes cluster: the project's
// own single-node test cluster, which scripts/k8s-env.sh starts (docs/kubernetes.md).
// They are behind the build tag k8s, so `go test ./...` does not build them; `make
// test` starts the cluster (scripts/k8s-test.sh setup) and tests with -tags k8s, and
// `make k8s-test` runs this package alone. A test finds the cluster through the
// kubeconfig at $CORDON_K8S_KUBECONFIG (default /var/lib/cordon-k8s/kubeconfig); without
// one it skips, except under CI=true, where it fails.
package k8s
