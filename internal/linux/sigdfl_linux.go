package linux

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// UnignoreSignals sets every signal this process inherited as ignored (SIG_IGN) back to
// its default action, but SIGKILL and SIGSTOP, which cannot be ignored. An ignored
// signal stays ignored across fork and exec: a process 1 that inherited one (its
// ancestors' choice, not the contract's: seen with signal 32 under a race-enabled test
// binary) would hand it to every command. The Go runtime leaves such signals alone
// (it installs no handler over an inherited SIG_IGN for them), so resetting them here
// takes nothing from it; signals it handles are never SIG_IGN.
func UnignoreSignals() {
	const sigIgn = 1
	for sig := uintptr(1); sig <= 64; sig++ {
		if sig == uintptr(unix.SIGKILL) || sig == uintptr(unix.SIGSTOP) {
			continue
		}
		// struct sigaction, as the kernel takes it on amd64 and arm64: the handler
		// first; flags, restorer and mask after, zero for SIG_DFL. 32 bytes hold it.
		var old, dfl [4]uint64
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, sig, 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
			continue
		}
		if old[0] == sigIgn {
			unix.RawSyscall6(unix.SYS_RT_SIGACTION, sig, uintptr(unsafe.Pointer(&dfl)), 0, 8, 0, 0)
		}
	}
}
