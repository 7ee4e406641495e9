package linux

import (
	"errors"
	"runtime"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The probes below make one system call each, only to see whether the sandbox refuses
// it (`cordon internal posture`). Their arguments make the kernel itself fail
// harmlessly when a call gets through (a NULL attribute, a path that does not exist,
// unshare in a multithreaded process), so a probe never changes anything. Each
// returns the call's errno, 0 when it succeeded.

const (
	probeBadFD          = ^uintptr(0) // -1
	probeKeySpecSession = ^uintptr(2) // -3, KEY_SPEC_SESSION_KEYRING
	probeAbsent         = "/nonexistent-cordon-posture"
)

func probe(nr uintptr, args ...uintptr) syscall.Errno {
	var a [6]uintptr
	copy(a[:], args)
	r, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if e == 0 && (nr == unix.SYS_BPF || nr == unix.SYS_PERF_EVENT_OPEN || nr == unix.SYS_IO_URING_SETUP) {
		unix.Close(int(r)) // got a descriptor: the call got through
	}
	return e
}

func probeStr(s string) uintptr {
	p, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(p))
}

// ProbeKeyctl asks for the session keyring's id without creating it.
func ProbeKeyctl() syscall.Errno {
	return probe(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, probeKeySpecSession, 0)
}

// ProbeBPF loads a BPF program from a NULL attribute.
func ProbeBPF() syscall.Errno { return probe(unix.SYS_BPF, unix.BPF_PROG_LOAD, 0, 0) }

// ProbePerfEventOpen opens a perf event from a NULL attribute.
func ProbePerfEventOpen() syscall.Errno {
	return probe(unix.SYS_PERF_EVENT_OPEN, 0, 0, probeBadFD, probeBadFD, 0)
}

// ProbeIOUringSetup sets up an io_uring of no entries from a NULL parameter block.
func ProbeIOUringSetup() syscall.Errno { return probe(unix.SYS_IO_URING_SETUP, 0, 0) }

// ProbeUnshareUser makes a new user namespace: refused by the kernel (EINVAL) in a
// multithreaded process such as this one, when nothing refuses it before.
func ProbeUnshareUser() syscall.Errno { return probe(unix.SYS_UNSHARE, unix.CLONE_NEWUSER) }

// ProbeMount mounts a tmpfs on a path that does not exist.
func ProbeMount() syscall.Errno {
	return probe(unix.SYS_MOUNT, probeStr("none"), probeStr(probeAbsent), probeStr("tmpfs"), 0, 0)
}

// ProbePtraceSeize tries to become pid's tracer without stopping it, and lets go at
// once when that worked.
func ProbePtraceSeize(pid int) syscall.Errno {
	runtime.LockOSThread() // the tracer is a thread
	defer runtime.UnlockOSThread()
	e := probe(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, 0)
	if e == 0 {
		_ = unix.PtraceDetach(pid)
	}
	return e
}

// ProbePidfdGetfd takes a duplicate of pid's descriptor fd through a pidfd (which
// anyone may open): the errno of pidfd_open when that fails, else of pidfd_getfd.
func ProbePidfdGetfd(pid, fd int) syscall.Errno {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return errnoOf(err)
	}
	defer unix.Close(pidfd)
	got, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return errnoOf(err)
	}
	unix.Close(got)
	return 0
}

// ProbeProcessVMRead reads one byte at address 0 of pid's memory: EFAULT when the
// kernel let this process at it, EPERM when not.
func ProbeProcessVMRead(pid int) syscall.Errno {
	var b [1]byte
	local := []unix.Iovec{{Base: &b[0], Len: 1}}
	remote := []unix.RemoteIovec{{Base: 0, Len: 1}}
	_, err := unix.ProcessVMReadv(pid, local, remote, 0)
	return errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EINVAL
}

// ProbeOpen opens path with flags (and O_CLOEXEC) and closes it again at once.
func ProbeOpen(path string, flags int) syscall.Errno {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	return errnoOf(err)
}

// ProbeCreate creates the new file path (O_EXCL, mode 0600) and removes it again.
func ProbeCreate(path string) syscall.Errno {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err == nil {
		unix.Close(fd)
		unix.Unlink(path)
	}
	return errnoOf(err)
}

// ProbeOpenUnfaulted is ProbeOpen with the path read from a page the process has not
// touched (a fresh shared mapping of a memfd holding it): a reader that may not fault,
// such as a BPF program at syscall entry, cannot read it until the kernel has.
func ProbeOpenUnfaulted(path string, flags int) syscall.Errno {
	fd, err := unix.MemfdCreate("cordon-probe", unix.MFD_CLOEXEC)
	if err != nil {
		return errnoOf(err)
	}
	defer unix.Close(fd)
	b := append([]byte(path), 0)
	if _, err := unix.Write(fd, b); err != nil {
		return errnoOf(err)
	}
	mem, err := unix.Mmap(fd, 0, len(b), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return errnoOf(err)
	}
	defer unix.Munmap(mem)
	dirfd := unix.AT_FDCWD
	r, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&mem[0])),
		uintptr(flags|unix.O_CLOEXEC), 0, 0, 0)
	if e == 0 {
		unix.Close(int(r))
	}
	return e
}

// ProbeOpenDropped is ProbeOpenUnfaulted tries times over with a second thread dropping
// the page that holds the path (MADV_DONTNEED) again and again: some opens find it gone
// after the kernel read it, so a reader at syscall exit, which may not fault either,
// cannot read it there. It returns how many opens succeeded.
func ProbeOpenDropped(path string, flags, tries int) (int, error) {
	fd, err := unix.MemfdCreate("cordon-probe", unix.MFD_CLOEXEC)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	b := append([]byte(path), 0)
	if _, err := unix.Write(fd, b); err != nil {
		return 0, err
	}
	mem, err := unix.Mmap(fd, 0, len(b), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(mem)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		for !stop.Load() {
			unix.Madvise(mem, unix.MADV_DONTNEED)
		}
	}()
	opened := 0
	dirfd := unix.AT_FDCWD
	for i := 0; i < tries; i++ {
		unix.Madvise(mem, unix.MADV_DONTNEED)
		r, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&mem[0])),
			uintptr(flags|unix.O_CLOEXEC), 0, 0, 0)
		if e == 0 {
			unix.Close(int(r))
			opened++
		}
	}
	stop.Store(true)
	<-done
	return opened, nil
}

// ProbeOpenIn opens dir with dirFlags and path relative to it with flags, by openat2
// with resolve when resolve is not 0 (RESOLVE_IN_ROOT: an absolute path is resolved
// below dir), else by openat; it closes both again.
func ProbeOpenIn(dir string, dirFlags int, path string, flags int, resolve uint64) syscall.Errno {
	dfd, err := unix.Open(dir, dirFlags|unix.O_CLOEXEC, 0)
	if err != nil {
		return errnoOf(err)
	}
	defer unix.Close(dfd)
	var fd int
	if resolve != 0 {
		fd, err = unix.Openat2(dfd, path, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: 0o600, Resolve: resolve})
	} else {
		fd, err = unix.Openat(dfd, path, flags|unix.O_CLOEXEC, 0o600)
	}
	if err == nil {
		unix.Close(fd)
	}
	return errnoOf(err)
}

// ProbeOpenBadPointer makes an openat whose path is at an address nothing is mapped at:
// the kernel fails it with EFAULT.
func ProbeOpenBadPointer() syscall.Errno {
	dirfd := unix.AT_FDCWD
	_, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), 8, unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
	return e
}
