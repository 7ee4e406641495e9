package linux

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// NewLoopbackNetns makes a network namespace whose one interface is loopback, brought
// up, and returns it open. It is made on an OS thread of its own (OnOwnThread), so the
// caller's thread stays where it was. Made by root, the namespace belongs to the
// initial user namespace: a process in it holds no capability over it unless it holds
// it on the host. It needs CAP_SYS_ADMIN.
func NewLoopbackNetns() (*os.File, error) {
	var f *os.File
	err := OnOwnThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("making a network namespace: %w", os.NewSyscallError("unshare", err))
		}
		if err := LoopbackUp(); err != nil {
			return err
		}
		fd, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("opening the new network namespace: %w", os.NewSyscallError("open", err))
		}
		f = os.NewFile(uintptr(fd), "netns")
		return nil
	})
	return f, err
}

// JoinNetns moves the calling thread (locked to its goroutine, meant to die with it)
// into the network namespace ns; a process it then forks starts there.
func JoinNetns(ns *os.File) error {
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("joining a network namespace: %w", os.NewSyscallError("setns", err))
	}
	return nil
}
