// Package kubernetes is the kubernetes placement of `cordon serve`: it places a
// session's sandbox on a Kubernetes cluster as the objects package podspec compiles
// from the session's plan, through client-go. [Placement.Create] checks the cluster
// first (the RuntimeClass the config names exists), then creates the NetworkPolicy
// and the Pod; [Placement.Delete] removes both and is idempotent.
//
// This is the first slice (docs/kubernetes.md): the Pod runs cordon's binary as
// process 1 in its posture, but its control channel, egress bridge and workspace
// streaming are still to come, and `cordon serve` does not place sessions here yet.
//
// Unstable until v1.
package kubernetes
