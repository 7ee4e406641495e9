package linux

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// LoadSeccompListenerThread installs prog on the calling OS thread only, as
// [LoadSeccompThread] does, with a listener (SECCOMP_FILTER_FLAG_NEW_LISTENER): the
// calls prog answers SECCOMP_RET_USER_NOTIF wait, in whatever the thread forks, until
// the listener answers them. It returns the listener, close-on-exec. Kernels before
// 5.0 have no listener (EINVAL); 5.5 added letting a call continue.
func LoadSeccompListenerThread(prog []bpf.RawInstruction) (*os.File, error) {
	fprog, filter, err := sockFprog(prog)
	if err != nil {
		return nil, err
	}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return nil, fmt.Errorf("loading seccomp filter with a listener: %w", errno)
	}
	return os.NewFile(fd, "seccomp-listener"), nil
}

// seccompNotif is struct seccomp_notif (linux/seccomp.h): 80 bytes.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

// seccompNotifResp is struct seccomp_notif_resp: 24 bytes.
type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// SECCOMP_IOCTL_NOTIF_SET_FLAGS (_IOW('!', 4, __u64)); x/sys/unix names it per arch.
const seccompIoctlNotifSetFlags = 0x40082104

// SeccompCall is a held system call as a listener receives it.
type SeccompCall struct {
	ID   uint64    // the notification's cookie, which the answer names
	PID  uint32    // the caller's thread, in the listener's pid namespace (0 outside it)
	Nr   int32     // the system call's number
	Args [6]uint64 // its arguments, as the filter saw them
}

// SeccompListener answers the calls a filter loaded with [LoadSeccompListenerThread]
// holds. Receive and Continue may be called from different goroutines; Close ends a
// Receive's wait.
//
// Receive waits in a blocking poll of its own thread rather than in the runtime's
// poller: a held call's round trip is then the kernel's wake-up of that thread, with
// no scheduling of a goroutine between (the barrier pays it on every call it traps).
type SeccompListener struct {
	fd           int
	stopR, stopW int          // a pipe: Close writes to it, ending a Receive's wait
	stopOnce     sync.Once    //
	mu           sync.RWMutex // mu guards closed: held shared across each use of the descriptors
	closed       bool
}

// NewSeccompListener takes f, a listener (it closes f).
func NewSeccompListener(f *os.File) (*SeccompListener, error) {
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("seccomp listener: %w", err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seccomp listener: %w", err)
	}
	return &SeccompListener{fd: fd, stopR: p[0], stopW: p[1]}, nil
}

// SyncWakeUp asks the kernel to wake the caller of a continued call on the
// listener's CPU (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6): a held call's round
// trip is then a switch rather than two wake-ups. Older kernels refuse it (EINVAL).
func (l *SeccompListener) SyncWakeUp() error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return fmt.Errorf("seccomp listener: sync wake-up: %w", os.ErrClosed)
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), seccompIoctlNotifSetFlags, unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP); errno != 0 {
		return fmt.Errorf("seccomp listener: sync wake-up: %w", errno)
	}
	return nil
}

// Receive waits for the next held call. It returns io.EOF once no process the filter
// was loaded on is left (and none can hold a call any more), and an error wrapping
// os.ErrClosed once Close was called.
func (l *SeccompListener) Receive() (SeccompCall, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for {
		if l.closed {
			return SeccompCall{}, fmt.Errorf("seccomp listener: %w", os.ErrClosed)
		}
		pfd := []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}, {Fd: int32(l.stopR), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return SeccompCall{}, fmt.Errorf("seccomp listener: %w", err)
		}
		switch {
		case pfd[1].Revents != 0:
			return SeccompCall{}, fmt.Errorf("seccomp listener: %w", os.ErrClosed)
		case pfd[0].Revents&unix.POLLIN != 0:
		case pfd[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0:
			return SeccompCall{}, io.EOF
		default:
			continue
		}
		n := seccompNotif{} // the kernel refuses a buffer that is not zeroed
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n)))
		switch errno {
		case 0:
			return SeccompCall{ID: n.id, PID: n.pid, Nr: n.nr, Args: n.args}, nil
		case unix.ENOENT, unix.EINTR:
			continue // the caller died, or was signalled, before we took it
		default:
			return SeccompCall{}, fmt.Errorf("seccomp listener: receive: %w", errno)
		}
	}
}

// Continue lets the held call id go on to the kernel as if the filter had allowed
// it (SECCOMP_USER_NOTIF_FLAG_CONTINUE). A caller that died meanwhile is not an
// error.
func (l *SeccompListener) Continue(id uint64) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return fmt.Errorf("seccomp listener: continue: %w", os.ErrClosed)
	}
	r := seccompNotifResp{id: id, flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&r)))
	if errno != 0 && errno != unix.ENOENT {
		return fmt.Errorf("seccomp listener: continue: %w", errno)
	}
	return nil
}

// Close closes the listener, once a Receive waiting has returned: a call still held,
// and every one the filter would hold from then on, fails with ENOSYS. It is
// idempotent.
func (l *SeccompListener) Close() error {
	l.stopOnce.Do(func() {
		_, _ = unix.Write(l.stopW, []byte{0})
		l.mu.Lock()
		defer l.mu.Unlock()
		l.closed = true
		unix.Close(l.fd)
		unix.Close(l.stopR)
		unix.Close(l.stopW)
	})
	return nil
}

// SeccompListenerSupported says why a filter's listener cannot hold calls for
// [SeccompListener.Continue] here ("" when it can): a kernel before 5.5 lacks
// SECCOMP_USER_NOTIF_FLAG_CONTINUE (5.0 added listeners), and one built without
// seccomp filters has neither.
func SeccompListenerSupported() string {
	var sizes [3]uint16 // struct seccomp_notif_sizes
	if _, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&sizes))); errno != 0 {
		return fmt.Sprintf("no seccomp listeners in this kernel (%v)", errno)
	}
	if sizes[0] < uint16(unsafe.Sizeof(seccompNotif{})) || sizes[1] < uint16(unsafe.Sizeof(seccompNotifResp{})) {
		return fmt.Sprintf("seccomp notification sizes %v are smaller than Linux 5.5's", sizes)
	}
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Sprintf("uname: %v", err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return fmt.Sprintf("kernel release %q: %v", unix.ByteSliceToString(u.Release[:]), err)
	}
	if major < 5 || major == 5 && minor < 5 {
		return fmt.Sprintf("kernel %d.%d has no SECCOMP_USER_NOTIF_FLAG_CONTINUE (5.5)", major, minor)
	}
	return ""
}

// IsSeccompListener reports whether f is a seccomp filter's listener.
func IsSeccompListener(f *os.File) bool {
	target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", f.Fd()))
	return err == nil && target == "anon_inode:seccomp notify"
}
