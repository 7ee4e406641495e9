package linux

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrSwapped means a mount point inside a tree is no longer the file its mount was
// cloned from: something renamed or replaced it in between.
var ErrSwapped = errors.New("replaced since it was cloned")

// AttachBeneath mounts the detached tree read-only, nosuid and nodev (every mount of
// it) at rel inside the mounted tree dir, which it does not leave: rel is resolved
// beneath dir without following a symbolic link (one met there now was planted since
// the Plan resolved its paths) and must exist. With same set, what is at rel must be
// the very file tree was cloned from (its root), or ErrSwapped: a name of a
// sandbox-writable workspace renamed or replaced since the clone would otherwise have
// the clone of one file mounted over another.
func AttachBeneath(tree, dir *os.File, rel string, same bool) error {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	target, err := unix.Openat2(int(dir.Fd()), rel, &how)
	if err != nil {
		return fmt.Errorf("opening %s without following links: %w", rel, err)
	}
	defer unix.Close(target)
	if same {
		var a, b unix.Stat_t
		if err := unix.Fstat(int(tree.Fd()), &a); err != nil {
			return err
		}
		if err := unix.Fstat(target, &b); err != nil {
			return err
		}
		if a.Dev != b.Dev || a.Ino != b.Ino {
			return fmt.Errorf("%s: %w", rel, ErrSwapped)
		}
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if err := unix.MountSetattr(int(tree.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("making %s read-only: %w", tree.Name(), err)
	}
	if err := unix.MoveMount(int(tree.Fd()), "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting %s at %s: %w", tree.Name(), rel, err)
	}
	return nil
}
