package linux

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// NoReserveUID is the file system uid [WithoutReserve] writes as: not root, to whom
// ext4 gives its reserved blocks (resuid 0), and no account's: (uid_t)-2, above every
// uid a sandbox can have (2^31-1).
const NoReserveUID = 1<<32 - 2

// WithoutReserve runs f on an OS thread of its own ([OnOwnThread]) whose writes cannot
// use a file system's blocks reserved for root: the thread's file system uid is
// [NoReserveUID] and it holds no CAP_SYS_RESOURCE (the two ways to ext4's reserve), so
// the kernel answers ENOSPC where it would answer an unprivileged user. Its other
// capabilities are kept (setfsuid drops CAP_DAC_OVERRIDE, CAP_CHOWN, CAP_FOWNER and
// the like from the effective set; they are raised again): f reads and writes what
// root may, but what it creates is [NoReserveUID]'s until it changes the owner.
//
// Linux keeps credentials per thread and the thread dies with f, so no other
// goroutine ever runs with them. f must write from its own goroutine (one it starts
// runs on another thread, as root) and must not start a program (exec makes the file
// system uid the effective uid again). A process that is not root has no reserve to
// give up but CAP_SYS_RESOURCE, which it drops.
func WithoutReserve(f func() error) error {
	return OnOwnThread(func() error {
		if err := leaveReserve(); err != nil {
			return fmt.Errorf("giving up the disk's reserve: %w", err)
		}
		return f()
	})
}

// leaveReserve makes the calling thread's file system uid NoReserveUID (when it is
// root's) and drops CAP_SYS_RESOURCE, keeping its other capabilities; it checks both.
func leaveReserve() error {
	_, caps, err := capGet()
	if err != nil {
		return err
	}
	if fsuid, _ := unix.SetfsuidRetUid(-1); fsuid == 0 {
		_, _ = unix.SetfsuidRetUid(NoReserveUID)
		if now, _ := unix.SetfsuidRetUid(-1); now != NoReserveUID {
			return fmt.Errorf("setfsuid(%d) did not take: the file system uid is %d", NoReserveUID, now)
		}
	}
	bit := uint32(1) << (unix.CAP_SYS_RESOURCE % 32)
	d := &caps[unix.CAP_SYS_RESOURCE/32]
	d.Effective &^= bit
	d.Permitted &^= bit
	d.Inheritable &^= bit
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3} // Pid 0: this thread
	if err := unix.Capset(&hdr, &caps[0]); err != nil {
		return os.NewSyscallError("capset", err)
	}
	if _, now, err := capGet(); err != nil || now[unix.CAP_SYS_RESOURCE/32].Effective&bit != 0 {
		return fmt.Errorf("CAP_SYS_RESOURCE still held after capset (err %v)", err)
	}
	return nil
}

// capGet is the calling thread's capabilities (version 3: two words of 32 bits).
func capGet() (unix.CapUserHeader, [2]unix.CapUserData, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3} // Pid 0: this thread
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return hdr, data, os.NewSyscallError("capget", err)
	}
	return hdr, data, nil
}
