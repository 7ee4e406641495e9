// Package podspec compiles a [contract.Plan] into the Kubernetes objects of one
// session of the kubernetes placement: a Pod whose process 1 is cordon's binary, in
// the posture cordon asks of every sandbox (a non-root uid, no capabilities, no
// privilege escalation, a read-only root file system, cordon's Localhost seccomp
// profile (package podseccomp, installed on the nodes), no service account token), and
// a NetworkPolicy that denies the Pod every connection, in and out, as defence in
// depth.
//
// It is pure: [Compile] gives the same objects for the same input, and [Objects.YAML]
// prints them deterministically for `cordon explain --placement kubernetes`. Creating
// them on a cluster is package placement/kubernetes's.
//
// The mapping reuses the container backends' decisions (runner/container): the
// contract's image is the root file system and provides the system paths (the @system
// rows of the plan are not mounted), each private tmpfs is a memory-backed volume of
// the tmpfs size, and the workspace is mounted at the same path as on the host. What a
// Pod cannot show, a host path outside the workspace, is refused, never dropped.
//
// Unstable until v1.
package podspec
