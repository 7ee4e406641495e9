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
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
)

// toolTimeout bounds each run of e2fsprogs' mke2fs, e2fsck and resize2fs.
const toolTimeout = 2 * time.Minute

// toolPath is where e2fsprogs' programs are looked for: root's directories only, never
// the daemon's PATH.
const toolPath = "/usr/sbin:/sbin:/usr/bin:/bin"

// Mount makes d.Root the mount point of d.Image's file system, d.Size bytes large:
// it makes the image (sparse) and its file system when there is none, attaches it to
// a loop device unless one already holds it, mounts it over the root unless it is
// already, and grows it to d.Size first when nothing uses it ([ErrGrowLater] when
// something does: the disk is then mounted as it is). A root that holds data but is
// not this disk, an image that is not a plain file of this process's user, or a disk
// larger than d.Size (shrinking is not done) is refused.
func Mount(ctx context.Context, d Disk) error {
	if d.Size < MinSize {
		return errdefs.Invalidf("disk of %s: %d bytes is below the least, %d", d.Root, d.Size, MinSize)
	}
	uid := paths.Owner()
	if err := paths.MakeDir(d.Root, uid); err != nil {
		return fmt.Errorf("disk of %s: %w", d.Root, err)
	}
	lock, err := lockImage(ctx, d)
	if err != nil {
		return err
	}
	defer lock.Close()
	img, made, err := openImage(ctx, d)
	if err != nil {
		return err
	}
	defer img.Close()
	dev, err := linux.LoopOf(img)
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
	if err := mountRoot(d, img, dev, made); err != nil {
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
	f, err = os.OpenFile(d.Image, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
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
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, false, fmt.Errorf("disk image %s: %w", d.Image, err)
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case st == nil || !fi.Mode().IsRegular():
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

// lockWait bounds how long Mount waits for another Mount of the same image.
const lockWait = 30 * time.Second

// lockImage takes an exclusive lock beside the image (ROOT.disk.lock), held until the
// returned file is closed (the end of Mount): two Mounts of one image at once (two
// servers starting together) would each find it unattached and attach it twice, two
// ext4 instances over one image, which corrupts it. The second waits, then finds the
// first's device. Not the image itself: a loop device holds the image's open file,
// and with it any lock taken on it, for as long as it is attached.
func lockImage(ctx context.Context, d Disk) (*os.File, error) {
	f, err := os.OpenFile(d.Image+".lock", os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("disk image lock: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		ok, err := linux.TryLock(f)
		if ok || err != nil {
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("disk image lock: %w", err)
			}
			return f, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("disk image %s: another process has been mounting it for %s (a second server on the same tenant roots?)", d.Image, lockWait)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// makeImage creates d.Image, sparse, of d.Size bytes, with an ext4 file system.
func makeImage(ctx context.Context, d Disk) (*os.File, error) {
	f, err := os.OpenFile(d.Image, os.O_RDWR|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("disk image %s: %w", d.Image, err)
	}
	fail := func(err error) (*os.File, error) {
		_ = os.Remove(d.Image)
		f.Close()
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

// mountRoot mounts the image open as img over d.Root unless it is mounted there
// already. dev is the loop device already holding the image, "" when none does.
func mountRoot(d Disk, img *os.File, dev string, made bool) error {
	root, on, err := linux.MountRoot(d.Root)
	if err != nil {
		return fmt.Errorf("disk of %s: %w", d.Root, err)
	}
	if root {
		if dev != "" && linux.DeviceOf(dev) == on {
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
		return linux.MountExt4(dev, d.Root)
	}
	for attempt := 1; ; attempt++ {
		loop, err := linux.AttachLoop(img)
		if err != nil {
			return fmt.Errorf("disk of %s: %w", d.Root, err)
		}
		// Once mounted, the file system holds the device; closing ours lets the kernel
		// detach it with the last unmount (or at once, the mount failed).
		err = linux.MountExt4(loop.Name(), d.Root)
		loop.Close()
		// A device freed a moment ago by the last unmount of an earlier start can be
		// handed out while the kernel still tears it down: the mount then fails with
		// EIO. Another attach, on a device detached since, is tried, twice at most.
		if err == nil || !errors.Is(err, syscall.EIO) || attempt == 3 {
			return err
		}
	}
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
	// e2fsck's exit status 1 is "errors corrected" (a journal replayed after a crash):
	// the file system is sound.
	var exit *exec.ExitError
	if err := tool(ctx, []*os.File{img}, "e2fsck", "-f", "-p", "/dev/fd/3"); err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return fmt.Errorf("growing disk image %s: %w", d.Image, err)
	}
	return tool(ctx, []*os.File{img}, "resize2fs", "/dev/fd/3")
}

// Unmount unmounts the tenant's disk from root (detached: the kernel frees its loop
// device with its last user, sandboxes' mount namespaces that may hold it a little
// longer). Call it only when no session of the tenant is left; the next Mount finds
// the disk attached but not mounted, if it still is, and mounts that same device.
func Unmount(root string) error { return linux.Unmount(root) }

// Space is the size of the file system at root and what a sandbox may still write on
// it (root's reserve left out), in bytes.
func Space(root string) (size, avail int64, err error) { return linux.FSSpace(root) }

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
