// Package linux is cordon's one door to the Linux kernel: cgroups, mount tables,
// namespaces and every system call (x/sys/unix, and the functions of package syscall)
// live here and nowhere else. Elsewhere package syscall is used for its types and
// constants only (internal/deps_test.go checks both).
package linux
