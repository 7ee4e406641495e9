// Package linux is cordon's one door to the Linux kernel: cgroups, mount tables,
// namespaces and other x/sys/unix use live here and nowhere else.
package linux
