package linux

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrNoPidCreds: this kernel has no PIDFD_GET_INFO (Linux 6.13 added it); the caller
// reads /proc/PID/status instead.
var ErrNoPidCreds = errors.New("the kernel cannot tell a process's ids through its pidfd")

// pidfdInfo is the kernel's struct pidfd_info as Linux 6.13 made it
// (PIDFD_INFO_SIZE_VER0, 64 bytes): the pid and creds parts are always filled in.
type pidfdInfo struct {
	Mask                     uint64
	CgroupID                 uint64
	Pid, Tgid, Ppid          uint32
	Ruid, Rgid, Euid, Egid   uint32
	Suid, Sgid, Fsuid, Fsgid uint32
	_                        uint32
}

// pidfdGetInfo is PIDFD_GET_INFO: _IOWR(PIDFS_IOCTL_MAGIC 0xFF, 11, struct pidfd_info).
const pidfdGetInfo = 3<<30 | uint(unsafe.Sizeof(pidfdInfo{}))<<16 | 0xFF<<8 | 11

// PidCreds returns the ids the process pid (of this pid namespace) runs with: its
// real, effective, saved and file system uids, then the same four gids, as
// /proc/PID/status's Uid and Gid lines give them, as this process's user namespace
// sees them. It asks the kernel through a pidfd (a pidfd_open, one ioctl, a close)
// instead of having it format the whole status file: a scan of every process this
// way costs a fraction of reading each status. A process gone before it was asked is
// [os.ErrProcessDone]; a kernel older than 6.13 is [ErrNoPidCreds].
func PidCreds(pid int) (ids [8]uint32, err error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return ids, os.ErrProcessDone
	}
	if err != nil {
		return ids, err
	}
	defer unix.Close(fd)
	info := pidfdInfo{Mask: 1<<0 | 1<<1} // PIDFD_INFO_PID | PIDFD_INFO_CREDS
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(pidfdGetInfo), uintptr(unsafe.Pointer(&info)))
		switch errno {
		case 0:
			return [8]uint32{info.Ruid, info.Euid, info.Suid, info.Fsuid, info.Rgid, info.Egid, info.Sgid, info.Fsgid}, nil
		case unix.EINTR:
			continue
		case unix.ENOTTY, unix.EINVAL:
			return ids, ErrNoPidCreds
		}
		return ids, errno
	}
}
