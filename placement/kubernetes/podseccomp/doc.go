// Package podseccomp makes the seccomp profile of a kubernetes placement's Pod, which
// a node's administrator installs in the kubelet's seccomp directory under the name
// the placement's config gives (podspec.DefaultSeccompProfile by default) and which
// the Pod's sandbox container names as its Localhost profile.
//
// It is containerd's RuntimeDefault profile for a process without capabilities
// (the same library's DefaultProfile), with one allowance more: clone(2) may create
// a user namespace and a network namespace (CLONE_NEWUSER, CLONE_NEWNET), which the
// Pod's process 1 needs to run its commands in an empty network namespace
// (sandboxinit/podnetns_linux.go). Every other namespace flag stays refused, unshare
// and setns stay refused, and clone3 still answers ENOSYS (its flags are out of a
// filter's sight), so a command cannot make namespaces through it either. cordon's
// own filter, stacked on every command by process 1, refuses clone with any
// CLONE_NEW* flag: the allowance is process 1's alone.
//
// Unstable until v1.
package podseccomp
