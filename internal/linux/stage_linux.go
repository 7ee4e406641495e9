package linux

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// Mount-tree primitives for staging an unprivileged sandbox's view of the host: what
// the runner, as root, must open, idmap and place where the sandbox's own uid can
// reach it before it hands over to bwrap running as that uid.

// ErrNoIdmap means a file system (or the kernel) cannot idmap a mount.
var ErrNoIdmap = errors.New("its file system does not support idmapped mounts")

// IdmapUserns returns a user namespace (as an open ns file) that maps fromUID to
// toUID and fromGID to toGID: an idmapped mount through it shows files owned by
// fromUID as owned by toUID, and files toUID creates are stored as fromUID. Only root
// can make one.
func IdmapUserns(fromUID, toUID, fromGID, toGID int) (*os.File, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// The child stops at its exec (ptrace) before running anything; its user
	// namespace outlives it through the open ns file.
	cmd := exec.Command(self)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: fromUID, HostID: toUID, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: fromGID, HostID: toGID, Size: 1}},
		Ptrace:      true,
		Pdeathsig:   syscall.SIGKILL,
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("creating an idmap user namespace: %w", err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid))
	if err != nil {
		return nil, fmt.Errorf("opening the idmap user namespace: %w", err)
	}
	return f, nil
}

// CloneTree returns a detached copy of the mount tree at path (relative to dir when
// dir is not nil), a slave of the original (nothing mounted in it reaches the
// original's peers), idmapped through userns when it is not nil.
func CloneTree(dir *os.File, path string, userns *os.File) (*os.File, error) {
	// The Plan's paths have every link resolved already: one that meets a symbolic
	// link now was swapped since (a workspace another run writes), and would mount
	// whatever it points to. Inside a tree, nothing may leave it either.
	dfd, how := unix.AT_FDCWD, unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	if dir != nil {
		dfd = int(dir.Fd())
		how.Resolve |= unix.RESOLVE_BENEATH
	}
	pfd, err := unix.Openat2(dfd, path, &how)
	if err != nil {
		return nil, fmt.Errorf("opening %s without following links: %w", path, err)
	}
	fd, err := unix.OpenTree(pfd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_EMPTY_PATH)
	unix.Close(pfd)
	if err != nil {
		return nil, fmt.Errorf("cloning the mount tree of %s: %w", path, err)
	}
	tree := os.NewFile(uintptr(fd), path)
	// A clone of a shared mount stays in its peer group: a mount made in the clone
	// (the hand-off attaching a protected name's tree beneath the workspace's) would be
	// made on the host's mount too, and outlive the run there. A slave still sees the
	// host's mounts and sends nothing back.
	slave := &unix.MountAttr{Propagation: unix.MS_SLAVE}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, slave); err != nil {
		tree.Close()
		return nil, fmt.Errorf("making the clone of %s a slave of its source: %w", path, err)
	}
	if userns != nil {
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns.Fd())}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
			tree.Close()
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) {
				return nil, fmt.Errorf("idmapping %s: %w (%w)", path, ErrNoIdmap, err)
			}
			return nil, fmt.Errorf("idmapping %s: %w", path, err)
		}
	}
	return tree, nil
}

// NoSUIDTree marks every mount of the detached tree nosuid and nodev: a file the
// sandbox made set-id, or a device node, means nothing through it (and through any
// bind an engine makes of it, which keeps the flags).
func NoSUIDTree(tree *os.File) error {
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(int(tree.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("marking %s nosuid and nodev: %w", tree.Name(), err)
	}
	return nil
}

// AttachTree mounts a detached tree at target, which must exist.
func AttachTree(tree *os.File, target string) error {
	if err := unix.MoveMount(int(tree.Fd()), "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", tree.Name(), target, err)
	}
	return nil
}

// MountTmpfs mounts a fresh tmpfs (mode 0755, root's) at target.
func MountTmpfs(target string) error {
	if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fmt.Errorf("mounting a tmpfs at %s: %w", target, err)
	}
	return nil
}

// PrivateMountNamespace moves the calling thread (locked, not the main thread, and
// meant to die with its goroutine) into a mount namespace of its own and makes every mount in it private,
// so that nothing it mounts propagates back to the host. It checks the move took:
// the thread's namespace is no longer its process's.
func PrivateMountNamespace() error {
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
		return fmt.Errorf("leaving the host's mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making the stage's mounts private: %w", err)
	}
	var self, proc unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/mnt", &self); err != nil {
		return err
	}
	if err := unix.Stat(fmt.Sprintf("/proc/%d/task/%d/ns/mnt", os.Getpid(), os.Getpid()), &proc); err != nil {
		return err
	}
	if self.Ino == proc.Ino && self.Dev == proc.Dev {
		return errors.New("the stage's thread is still in its process's mount namespace")
	}
	return nil
}

// OnOwnThread runs f on an OS thread of its own that dies when f returns (the
// goroutine ends locked), so that whatever f does to its thread — a mount namespace,
// a Landlock domain, a seccomp filter — goes with it. Never the process's main
// thread: a namespace the main thread joined is the one /proc/self shows, and the Go
// runtime keeps that thread alive.
func OnOwnThread(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == os.Getpid() {
			// Hold the main thread while another goroutine gets a thread of its own,
			// then let the main thread go, untouched.
			done <- OnOwnThread(f)
			runtime.UnlockOSThread()
			return
		}
		done <- f()
	}()
	return <-done
}

// openParentNoLinks opens p's parent directory (O_PATH) without following any
// symbolic link on the way: for host paths that lie in a writable workspace, where the
// sandbox may have planted one. The parent's missing directories are created first
// when mkdir is set, each without following links either.
func openParentNoLinks(p string, mkdir bool) (int, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	dir := filepath.Dir(p)
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &how)
	if err == nil || !mkdir || !errors.Is(err, unix.ENOENT) {
		return fd, err
	}
	pfd, err := openParentNoLinks(dir, true)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	if err := unix.Mkdirat(pfd, filepath.Base(dir), 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	how.Resolve |= unix.RESOLVE_BENEATH
	return unix.Openat2(pfd, filepath.Base(dir), &how)
}

// renameExcl renames from to to in the directory dfd, never over an entry at to
// (EEXIST; RENAME_NOREPLACE).
func renameExcl(dfd int, from, to string) error {
	return unix.Renameat2(dfd, from, dfd, to, unix.RENAME_NOREPLACE)
}
