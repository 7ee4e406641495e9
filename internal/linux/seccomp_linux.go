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
