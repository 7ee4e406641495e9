package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Loop devices and the mounts of a file system image (a served tenant's disk).

// MountRoot reports whether path (not followed if a link) is the root of a mount,
// and the device number of the file system it is on. A kernel that cannot say
// (statx's STATX_ATTR_MOUNT_ROOT, Linux 5.8) is an error, never a guess.
func MountRoot(path string) (root bool, dev uint64, err error) {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err != nil {
		return false, 0, &os.PathError{Op: "statx", Path: path, Err: err}
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, 0, fmt.Errorf("%s: the kernel does not say which directories are mount points (statx, Linux 5.8)", path)
	}
	return stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, unix.Mkdev(stx.Dev_major, stx.Dev_minor), nil
}

// LoopOf is the loop device (/dev/loopN) whose backing file is the file open as f,
// found by the device and inode the kernel reports for each loop device, or "" when
// none is.
func LoopOf(f *os.File) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", err
	}
	names, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return "", err
	}
	for _, n := range names {
		dev := "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(n)))
		if loopBacks(dev, st.Dev, st.Ino) {
			return dev, nil
		}
	}
	return "", nil
}

// loopBacks reports whether loop device dev's backing file is inode ino of device devno.
func loopBacks(dev string, devno, ino uint64) bool {
	fd, err := unix.Open(dev, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	info, err := unix.IoctlLoopGetStatus64(fd)
	return err == nil && info.Device == devno && info.Inode == ino
}

// DeviceOf is the device number of the block device node dev (0 when it is none).
func DeviceOf(dev string) uint64 {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return 0
	}
	return st.Rdev
}

// AttachLoop attaches the file open as f (read-write) to a free loop device that
// detaches itself when its last user goes (LO_FLAGS_AUTOCLEAR), and returns the
// device open: mount it, then close it. A device another process takes between the
// kernel naming it free and the attach is skipped for the next.
func AttachLoop(f *os.File) (*os.File, error) {
	ctl, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening /dev/loop-control: %w", err)
	}
	defer unix.Close(ctl)
	for range 64 {
		n, err := unix.IoctlRetInt(ctl, unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("asking for a free loop device: %w", err)
		}
		dev := "/dev/loop" + strconv.Itoa(n)
		fd, err := unix.Open(dev, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("opening %s: %w", dev, err)
		}
		cfg := unix.LoopConfig{Fd: uint32(f.Fd())}
		cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
		err = unix.IoctlLoopConfigure(fd, &cfg)
		if errors.Is(err, unix.EBUSY) {
			unix.Close(fd) // taken meanwhile: the next free one
			continue
		}
		if err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("attaching %s: %w", dev, err)
		}
		return os.NewFile(uintptr(fd), dev), nil
	}
	return nil, errors.New("no loop device stayed free long enough to attach")
}

// MountExt4 mounts the ext4 file system on block device dev at target; nothing on it
// is a device or gains privilege when run (nosuid, nodev).
func MountExt4(dev, target string) error {
	if err := unix.Mount(dev, target, "ext4", unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", dev, target, err)
	}
	return nil
}

// FSSpace is the size of the file system at path and what an unprivileged user may
// still write on it (root's reserve left out), in bytes.
func FSSpace(path string) (size, avail int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	bs := int64(st.Bsize)
	return int64(st.Blocks) * bs, int64(st.Bavail) * bs, nil
}

// MountTmpfsWith mounts a fresh tmpfs at target with the options data (size=,
// nr_inodes=, mode=), nosuid and nodev.
func MountTmpfsWith(target, data string) error {
	if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return fmt.Errorf("mounting a tmpfs at %s: %w", target, err)
	}
	return nil
}

// FSFree is what root may still write on the file system at path, its reserved blocks
// included, in bytes (statfs's f_bfree).
func FSFree(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: path, Err: err}
	}
	return int64(st.Bfree) * int64(st.Bsize), nil
}
