package linux

import "golang.org/x/sys/unix"

// RaiseMemlock lifts RLIMIT_MEMLOCK as far as it may so that BPF maps can be created on
// kernels older than 5.11, which charge them to it (newer ones charge the memory
// cgroup and ignore it). It replaces cilium/ebpf's rlimit package, whose init probes the
// kernel with a BPF syscall in every process that links it, on every start. Where the
// limit cannot be raised it is left alone: map creation then says what failed.
func RaiseMemlock() {
	inf := unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}
	if unix.Setrlimit(unix.RLIMIT_MEMLOCK, &inf) == nil {
		return
	}
	var cur unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &cur) == nil {
		cur.Cur = cur.Max
		_ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &cur)
	}
}

// NoCoreDumps sets the calling process's RLIMIT_CORE to zero, soft and hard: neither
// it nor any process it starts dumps core (a process without CAP_SYS_RESOURCE in the
// initial user namespace cannot raise the hard limit again). A core file is written by
// the kernel into the crashing process's working directory, with no system call a
// seccomp filter could hold.
func NoCoreDumps() error {
	return unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
}
