package disk

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/containerd/mount"
	"golang.org/x/sys/unix"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
)

// toolTimeout bounds mke2fs and resize2fs.
const toolTimeout = 2 * time.Minute

// toolPath is where mke2fs and resize2fs are looked for: root's directories only,
// never the daemon's PATH.
const toolPath = "/usr/sbin:/sbin:/usr/bin:/bin"

// mountFlags: nothing on a tenant's disk is a device or gains privilege when run.
const mountFlags = unix.MS_NOSUID | unix.MS_NODEV

// Mount makes d.Root the mount point of d.Image's file system, d.Size bytes large:
// it makes the image (sparse) and its file system when there is none, attaches it to
// a loop device unless one already holds it, mounts it over the root unless it is
// already, and grows it to d.Size first when nothing uses it ([ErrGrowLater] when
// something does: the disk is then mounted as it is). A root that holds data but is not this disk, an
// image that is not a plain file of this process's user, or a disk larger than d.Size
// (shrinking is not done) is refused.
func Mount(ctx context.Context, d Disk) error {
	if d.Size < MinSize {
		return errdefs.Invalidf("disk of %s: %d bytes is below the least, %d", d.Root, d.Size, MinSize)
	}
	uid := paths.Owner()
	if err := paths.MakeDir(d.Root, uid); err != nil {
		return fmt.Errorf("disk of %s: %w", d.Root, err)
	}
	img, made, err := openImage(ctx, d)
	if err != nil {
		return err
	}
	defer img.Close()
	dev, err := attached(img)
	if err != nil {
		return err
	}
	var later error
	if dev == "" {
		if err := grow(ctx, d, img); err != nil {
			return err
		}
	} else if st, err := img.Stat(); err == nil && st.Size() < d.Size {
		later = fmt.Errorf("disk of %s: %w (it holds %d bytes, quotas.disk says %d)", d.Root, ErrGrowLater, st.Size(), d.Size)
	}
	if err := mountRoot(d, dev, made); err != nil {
		if made {
			_ = os.Remove(d.Image)
		}
		return err
	}
	// The file system's root takes the root directory's place: as paths.MakeDir
	// makes it, the user's alone.
	if err := os.Chown(d.Root, uid, -1); err != nil {
		return fmt.Errorf("disk of %s: %w", d.Root, err)
	}
	if err := os.Chmod(d.Root, 0o700); err != nil {
		return err
	}
	return later
}

// openImage opens d.Image, making it (sparse, with its file system) when it does not
// exist; made says it did. The image must be a regular file of this process's user that
// no one else may write, with one link, no larger than d.Size.
func openImage(ctx context.Context, d Disk) (f *os.File, made bool, err error) {
	f, err = os.OpenFile(d.Image, os.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if err := rootEmpty(d.Root); err != nil {
			return nil, false, err
		}
		f, err = makeImage(ctx, d)
		return f, err == nil, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("disk image %s: %w", d.Image, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("disk image %s: %w", d.Image, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		err = fmt.Errorf("%w: disk image %s is not a regular file", paths.ErrUnsafe, d.Image)
	case int(st.Uid) != paths.Owner() || st.Mode&0o022 != 0:
		err = fmt.Errorf("%w: disk image %s is owned by uid %d, mode %o: want the server's user's, writable by no one else", paths.ErrUnsafe, d.Image, st.Uid, st.Mode&0o777)
	case st.Nlink != 1:
		err = fmt.Errorf("%w: disk image %s has %d links", paths.ErrUnsafe, d.Image, st.Nlink)
	case st.Size > d.Size:
		err = errdefs.Invalidf("disk image %s holds %d bytes, more than quotas.disk (%d): a tenant's disk is never shrunk; raise the quota, or remove the image with the tenant's data", d.Image, st.Size, d.Size)
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	return f, false, nil
}

// makeImage creates d.Image, sparse, of d.Size bytes, with an ext4 file system.
func makeImage(ctx context.Context, d Disk) (*os.File, error) {
	f, err := os.OpenFile(d.Image, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("disk image %s: %w", d.Image, err)
	}
	fail := func(err error) (*os.File, error) {
		f.Close()
		_ = os.Remove(d.Image)
		return nil, err
	}
	if err := f.Truncate(d.Size); err != nil {
		return fail(fmt.Errorf("disk image %s: %w", d.Image, err))
	}
	// The image is new and sparse: its unwritten blocks read as zeros, so nothing need
	// be zeroed now or later (no lazy inode-table initialisation in the background).
	// The descriptor is passed, not the name: mke2fs formats this very file.
	err = tool(ctx, []*os.File{f}, "mke2fs", "-q", "-F", "-t", "ext4", "-m", strconv.Itoa(ReservePercent),
		"-E", fmt.Sprintf("lazy_itable_init=1,lazy_journal_init=1,assume_storage_prezeroed=1,nodiscard,root_owner=%d:%d", paths.Owner(), os.Getegid()),
		"-L", "cordon-tenant", "/dev/fd/3")
	if err != nil {
		return fail(fmt.Errorf("disk image %s: %w", d.Image, err))
	}
	return f, nil
}

// rootEmpty refuses a root that already holds something: mounting over it would hide
// a tenant's data from the server.
func rootEmpty(root string) error {
	dir, err := os.Open(root)
	if err != nil {
		return fmt.Errorf("disk of %s: %w", root, err)
	}
	defer dir.Close()
	if names, _ := dir.Readdirnames(1); len(names) > 0 {
		return errdefs.Invalidf("tenant root %s holds data but has no disk image (%s): move the data out, or set quotas.disk to host", root, ImagePath(root))
	}
	return nil
}

// mountRoot mounts the image over d.Root unless it is mounted there already. dev is
// the loop device already holding the image, "" when none does.
func mountRoot(d Disk, dev string, made bool) error {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, d.Root, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err != nil {
		return fmt.Errorf("disk of %s: %w", d.Root, err)
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return errdefs.Unsupportedf("disk of %s: the kernel does not say which directories are mount points (statx, Linux 5.8)", d.Root)
	}
	if stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		if dev != "" && isDevice(dev, stx.Dev_major, stx.Dev_minor) {
			return nil // mounted by an earlier start
		}
		return fmt.Errorf("%w: tenant root %s is a mount point of something other than its disk image %s", paths.ErrUnsafe, d.Root, d.Image)
	}
	if !made {
		if err := rootEmpty(d.Root); err != nil {
			return err
		}
	}
	if dev != "" {
		// Still attached: a killed daemon's sessions hold it. The same device, never a
		// second one over the same image.
		if err := unix.Mount(dev, d.Root, "ext4", mountFlags, ""); err != nil {
			return fmt.Errorf("disk of %s: mounting %s: %w", d.Root, dev, err)
		}
		return nil
	}
	m := mount.Mount{Type: "ext4", Source: d.Image, Options: []string{"loop", "nosuid", "nodev"}}
	if err := m.Mount(d.Root); err != nil {
		return fmt.Errorf("disk of %s: mounting %s: %w", d.Root, d.Image, err)
	}
	return nil
}

// grow enlarges the image to d.Size and its file system with it, before it is
// mounted (growing a mounted ext4 needs CAP_SYS_RESOURCE, which root may lack, as
// in some containers).
func grow(ctx context.Context, d Disk, img *os.File) error {
	st, err := img.Stat()
	if err != nil || st.Size() >= d.Size {
		return err
	}
	if err := img.Truncate(d.Size); err != nil {
		return fmt.Errorf("growing disk image %s: %w", d.Image, err)
	}
	// resize2fs wants a clean, checked file system; -p repairs only what is safe.
	if err := tool(ctx, []*os.File{img}, "e2fsck", "-f", "-p", "/dev/fd/3"); err != nil {
		return fmt.Errorf("growing disk image %s: %w", d.Image, err)
	}
	return tool(ctx, []*os.File{img}, "resize2fs", "/dev/fd/3")
}

// attached is the loop device holding the image open as f ("" for none), found by
// the device and inode the kernel reports for each loop device's backing file.
func attached(f *os.File) (string, error) {
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
		if backs(dev, st.Dev, st.Ino) {
			return dev, nil
		}
	}
	return "", nil
}

// backs reports whether loop device dev's backing file is inode ino of device devno.
func backs(dev string, devno, ino uint64) bool {
	f, err := os.OpenFile(dev, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	return err == nil && info.Device == devno && info.Inode == ino
}

// isDevice reports whether the block device node dev is major:minor.
func isDevice(dev string, major, minor uint32) bool {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return false
	}
	return unix.Major(st.Rdev) == major && unix.Minor(st.Rdev) == minor
}

// Unmount unmounts the tenant's disk from root; the kernel frees its loop device with
// its last mount (sandboxes' mount namespaces may hold it a little longer). A root
// that is not a mount point is left as it is. It must be called only when no session
// of the tenant is left: the next Mount would otherwise find the disk attached but
// not mounted, and mount that same device again, which is safe, but the sessions'
// files would have been out of the server's reach meanwhile.
func Unmount(root string) error {
	var stx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, root, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &stx); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return nil
	}
	if err := unix.Unmount(root, unix.UMOUNT_NOFOLLOW); err != nil {
		return fmt.Errorf("unmounting the disk of %s: %w", root, err)
	}
	return nil
}

// Space is the size of the file system at root and what a sandbox may still write on
// it (root's reserve left out), in bytes.
func Space(root string) (size, avail int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return 0, 0, err
	}
	bs := int64(st.Bsize)
	return int64(st.Blocks) * bs, int64(st.Bavail) * bs, nil
}

// tool runs one of e2fsprogs' programs from root's directories, bounded in time, with
// files as its descriptors 3 and on.
func tool(ctx context.Context, files []*os.File, name string, args ...string) error {
	path := ""
	for _, dir := range filepath.SplitList(toolPath) {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && st.Mode().IsRegular() {
			path = filepath.Join(dir, name)
			break
		}
	}
	if path == "" {
		return errdefs.Unavailablef("%s not found in %s: install e2fsprogs", name, toolPath)
	}
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{"PATH=" + toolPath, "LC_ALL=C"}
	cmd.ExtraFiles = files
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
