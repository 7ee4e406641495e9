package linux

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The empty network namespace of a process that holds no capability (a Kubernetes
// Pod's process 1): it cannot unshare a network namespace by itself, but it can start
// a child in a new user namespace that owns a new network namespace, mapping only its
// own uid and gid. The child (execve'd, so a single thread made it) starts with
// [EmptyNetnsCaps] in that user namespace, brings loopback up with
// [LoopbackUp] and gives them up with [DropAllCaps].

// EmptyNetnsCaps are the capabilities the child of [EmptyNetnsAttr] holds after its
// exec, in its own user namespace only: CAP_NET_ADMIN to bring loopback up and
// CAP_SETPCAP to empty its bounding set. A child without a cap in its ambient set
// would hold none after its exec (its uid is not 0 in the namespace).
var EmptyNetnsCaps = []uintptr{unix.CAP_NET_ADMIN, unix.CAP_SETPCAP}

// EmptyNetnsAttr is the SysProcAttr of a child started in a new user namespace and a
// new network namespace it owns (loopback only, down), with the caller's uid and gid
// mapped to themselves and nothing else mapped (setgroups denied), holding
// [EmptyNetnsCaps] in that namespace, and killed when its parent dies. Go makes the
// child with clone(2), not clone3: Cloneflags needs no cgroup descriptor.
func EmptyNetnsAttr() *syscall.SysProcAttr {
	uid, gid := os.Geteuid(), os.Getegid()
	return &syscall.SysProcAttr{
		Cloneflags:                 unix.CLONE_NEWUSER | unix.CLONE_NEWNET,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
		GidMappingsEnableSetgroups: false,
		AmbientCaps:                EmptyNetnsCaps,
		Pdeathsig:                  syscall.SIGKILL,
	}
}

// LoopbackUp brings the loopback interface of the caller's network namespace up
// (it needs CAP_NET_ADMIN in the namespace's owner).
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return os.NewSyscallError("socket", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback's flags: %w", os.NewSyscallError("ioctl", err))
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bringing loopback up: %w", os.NewSyscallError("ioctl", err))
	}
	return nil
}

// Errors of [DropAllCaps].
var (
	// ErrCapsLeft means a capability set was not empty after it.
	ErrCapsLeft = errors.New("a capability set is not empty")
	// ErrCgo means the binary links cgo, whose threads Go cannot make a system call on.
	ErrCgo = errors.New("a binary linking cgo cannot drop the capabilities of every thread")
)

// DropAllCaps gives up every capability of every thread of the process for good:
// no_new_privs, the bounding set emptied (which needs CAP_SETPCAP, so it comes first),
// the ambient set cleared, then the effective, permitted and inheritable sets. Each is
// a thread's own, so each call runs on every thread (it needs a binary without cgo).
// It checks the calling thread's sets afterwards.
func DropAllCaps() error {
	if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := allThreads(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil {
		return fmt.Errorf("clearing the ambient set: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3} // Pid 0: each thread itself
	var data [2]unix.CapUserData
	if err := allThreads(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); err != nil {
		return fmt.Errorf("clearing the capability sets: %w", err)
	}
	_, now, err := capGet()
	if err != nil {
		return err
	}
	for _, d := range now {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("%w after capset: %+v", ErrCapsLeft, now)
		}
	}
	for c := 0; c <= last; c++ {
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err != nil || in != 0 {
			return fmt.Errorf("%w: capability %d is still in the bounding set (err %v)", ErrCapsLeft, c, err)
		}
	}
	return nil
}

// allThreads makes the system call on every thread of the process.
func allThreads(trap, a1, a2, a3 uintptr) error {
	_, _, e := syscall.AllThreadsSyscall(trap, a1, a2, a3)
	switch {
	case e == syscall.ENOTSUP:
		return ErrCgo
	case e != 0:
		return e
	}
	return nil
}

// lastCap is the highest capability number the kernel knows.
func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	var n int
	if _, err := fmt.Sscanf(string(b), "%d", &n); err != nil || n < 0 || n > 63 {
		return 0, fmt.Errorf("/proc/sys/kernel/cap_last_cap: %q", b)
	}
	return n, nil
}

// SetChildSubreaper makes the caller the subreaper of its descendants: an orphan among
// them is reparented to it rather than to process 1.
func SetChildSubreaper() error {
	return os.NewSyscallError("prctl", unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
}
