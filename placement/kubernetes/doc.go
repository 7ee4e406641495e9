// Package kubernetes is the kubernetes placement of `cordon serve`: it places a
// session's sandbox on a Kubernetes cluster as the objects package podspec compiles
// from the session's plan, through client-go. [Placement.Create] checks the cluster
// first (the RuntimeClass the config names exists), then creates the NetworkPolicy
// and the Pod; [Placement.Delete] removes both and is idempotent. [Placement.Attach]
// opens the Pod's control channel. A [Pool] keeps warm Pods of one template running
// for sessions to claim ([Pool.Claim]) instead of creating their own.
//
// docs/kubernetes.md says what is done: the egress bridge's proxy and the workspace's
// streaming are still to come, and `cordon serve` does not place sessions here yet.
//
// Unstable until v1.
package kubernetes
