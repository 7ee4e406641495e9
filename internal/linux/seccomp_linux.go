package linux

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompMaxInsns is the kernel's limit on a classic-BPF filter (BPF_MAXINSNS).
const seccompMaxInsns = 4096

// LoadSeccomp installs prog, a classic-BPF seccomp filter such as
// internal/seccomp.Program returns, on every thread of the calling process, for
// good: filters cannot be removed, only stacked, and they survive fork and execve.
//
// It first sets no_new_privs, which an unprivileged process needs to install a
// filter (and which cordon's process 1 has already set: setting it again is
// harmless). Both steps run on one locked OS thread, so that the flag and the filter
// land on the same thread; SECCOMP_FILTER_FLAG_TSYNC then gives the filter, and the
// flag, to every other thread of the process, so the caller need not lock its
// goroutine and no Go runtime thread escapes. Threads created later inherit it.
//
// It is meant for a process about to execve the sandboxed command (process 1's
// trampoline): the Go runtime keeps working under the sandbox's filter, but nothing
// the filter denies can be done by the process afterwards. It fails when another
// thread already has a filter this one does not descend from.
func LoadSeccomp(prog []bpf.RawInstruction) error {
	fprog, filter, err := sockFprog(prog)
	if err != nil {
		return err
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("loading seccomp filter: %w", errno)
	}
	if tid != 0 {
		// With TSYNC, a positive return is the thread that could not be synchronised.
		return fmt.Errorf("loading seccomp filter: thread %d has a divergent filter", tid)
	}
	return nil
}

// LoadSeccompThread installs prog on the calling OS thread only, for good: what it
// forks inherits it. no_new_privs must be set already (process 1 has it). The caller
// holds runtime.LockOSThread and ends its goroutine without unlocking, so that the
// thread dies rather than run other goroutines under the filter.
func LoadSeccompThread(prog []bpf.RawInstruction) error {
	fprog, filter, err := sockFprog(prog)
	if err != nil {
		return err
	}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("loading seccomp filter: %w", errno)
	}
	return nil
}

// sockFprog is prog as the kernel takes it; filter backs it and must stay alive
// until the call that loads it returns.
func sockFprog(prog []bpf.RawInstruction) (fprog unix.SockFprog, filter []unix.SockFilter, err error) {
	if len(prog) == 0 || len(prog) > seccompMaxInsns {
		return fprog, nil, fmt.Errorf("loading seccomp filter: %d instructions, want 1 to %d", len(prog), seccompMaxInsns)
	}
	filter = make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	return unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}, filter, nil
}
