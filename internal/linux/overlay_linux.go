package linux

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// NewOverlay returns a detached overlay mount (an O_PATH-like mount fd, to attach
// with AttachTree or clone from with CloneTree) whose one lower layer is lower and
// whose writes go to upper, with work as overlayfs' scratch directory (both on one
// file system, work empty). Each layer is handed to the kernel as an open file, not a
// path string: nothing in a path is parsed as an option (overlayfs splits its string
// options on ',' and ':'), and nothing is looked up again after it was opened.
//
// Features that would make the upper directory more than a plain change set are
// off: redirect_dir (a renamed lower directory is copied, not recorded as a
// pointer), metacopy (a chmod copies the data too), index and xino. What a reader
// of upper meets is then files, directories, symbolic links, whiteouts (0/0
// character devices) and opaque directories ("trusted.overlay.opaque").
//
// The overlay is made WithoutReserve: overlayfs writes its upper directory with its
// maker's credentials (a sandbox's writes, copy-ups and whiteouts alike), which would
// otherwise be root's and reach the file system's reserved blocks.
func NewOverlay(lower, upper, work *os.File) (*os.File, error) {
	var ov *os.File
	err := WithoutReserve(func() error {
		var err error
		ov, err = newOverlay(lower, upper, work)
		return err
	})
	return ov, err
}

func newOverlay(lower, upper, work *os.File) (*os.File, error) {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("opening overlayfs: %w", err)
	}
	defer unix.Close(fsfd)
	set := func(key string, f *os.File) error {
		return unix.FsconfigSetFd(fsfd, key, int(f.Fd()))
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"lower layer", func() error { return set("lowerdir+", lower) }},
		{"upper layer", func() error { return set("upperdir", upper) }},
		{"work directory", func() error { return set("workdir", work) }},
		{"redirect_dir", func() error { return unix.FsconfigSetString(fsfd, "redirect_dir", "off") }},
		{"metacopy", func() error { return unix.FsconfigSetString(fsfd, "metacopy", "off") }},
		{"index", func() error { return unix.FsconfigSetString(fsfd, "index", "off") }},
		{"xino", func() error { return unix.FsconfigSetString(fsfd, "xino", "off") }},
		{"creating it", func() error { return unix.FsconfigCreate(fsfd) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return nil, fmt.Errorf("overlay: %s: %w", s.what, err)
		}
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return nil, fmt.Errorf("overlay: mounting: %w", err)
	}
	return os.NewFile(uintptr(mfd), "overlay"), nil
}

// OpenDirNoLinks opens the directory p (O_PATH) without following any symbolic link.
func OpenDirNoLinks(p string) (*os.File, error) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &how)
	if err != nil {
		return nil, fmt.Errorf("opening %s without following links: %w", p, err)
	}
	return os.NewFile(uintptr(fd), p), nil
}

// NewOverlayView returns a detached, read-only overlay of layers, the first on top:
// a staged run's upper directory over the workspace shows the workspace as the run
// left it, whiteouts and opaque directories applied, without anything being
// mounted anywhere (the view goes when the returned file is closed). Open it as a
// directory through [FDPath].
func NewOverlayView(layers ...*os.File) (*os.File, error) {
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("opening overlayfs: %w", err)
	}
	defer unix.Close(fsfd)
	for _, l := range layers {
		if err := unix.FsconfigSetFd(fsfd, "lowerdir+", int(l.Fd())); err != nil {
			return nil, fmt.Errorf("overlay view: layer %s: %w", l.Name(), err)
		}
	}
	for _, o := range []string{"redirect_dir", "metacopy", "index", "xino"} {
		if err := unix.FsconfigSetString(fsfd, o, "off"); err != nil {
			return nil, fmt.Errorf("overlay view: %s: %w", o, err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return nil, fmt.Errorf("overlay view: creating it: %w", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return nil, fmt.Errorf("overlay view: mounting: %w", err)
	}
	return os.NewFile(uintptr(mfd), "overlay-view"), nil
}

// FDPath is the path through which this process reopens f.
func FDPath(f *os.File) string { return fmt.Sprintf("/proc/self/fd/%d", f.Fd()) }

// Unmount detaches the mount at target (MNT_DETACH, following no link); a target
// that is not a mount point, or is gone, is no error.
func Unmount(target string) error {
	err := unix.Unmount(target, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmounting %s: %w", target, err)
}

// UnmountBelow detaches every mount strictly below dir (deepest first) in this mount
// namespace, so that removing dir's contents never reaches through one into what it
// shows (an idmapped workspace). It reports the mounts it could not detach: then
// nothing below dir may be removed.
func UnmountBelow(dir string) error {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		dir = r
	}
	// Mounts stacked on one point come off one per pass; the passes are bounded.
	for pass := 0; pass < 64; pass++ {
		data, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			return fmt.Errorf("listing the mounts below %s: %w", dir, err)
		}
		var below []string
		for _, m := range ParseMountinfo(string(data)) {
			if strings.HasPrefix(m.Point, dir+"/") {
				below = append(below, m.Point)
			}
		}
		if len(below) == 0 {
			return nil
		}
		sort.Slice(below, func(i, j int) bool { return len(below[i]) > len(below[j]) })
		var errs []error
		for _, p := range below {
			if err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	return fmt.Errorf("unmounting below %s: mounts remain", dir)
}
