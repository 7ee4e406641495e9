// Package disk bounds what one tenant can put on the host's disk. A tenant's root
// (its workspaces, run directories, stages, checkpoints and audit logs) is an ext4 file
// system of its own: a sparse image file of the tenant's quotas.disk, attached to a loop
// device and mounted over the root. A sandbox that writes without end fills its
// tenant's file system, never the host's nor another tenant's.
//
// The file system keeps ext4's reserved blocks (ReservePercent) for uid 0: sandboxes run
// as unprivileged host uids and cannot write them, cordon writes its records and logs
// as root, so a tenant whose sandboxes filled their disk still gets its runs' logs
// appended and sealed. What cordon writes of the tenant's own data (checkpoint copies,
// spill files, uploads, applied stages, patch files, a staged sandbox's writes through
// the overlay cordon mounts) it writes through internal/linux's WithoutReserve, from a
// thread that is neither file system uid 0 nor holds CAP_SYS_RESOURCE: the kernel
// refuses it the reserve as it refuses a sandbox.
//
// Mount is idempotent and safe across restarts: a root already mounted from its image
// is kept, and an image still attached to a loop device (sessions of a daemon that was
// killed hold it) is mounted from that device again, never attached twice: two loop
// devices over one ext4 image would corrupt it.
package disk

import (
	"errors"
	"path/filepath"
)

// MinSize is the smallest disk a tenant may be given: ext4's journal and metadata
// need a few megabytes, a workspace more.
const MinSize = 32 << 20

// ReservePercent of the file system is writable by root only (mke2fs -m).
const ReservePercent = 5

// Disk is one tenant's file system.
type Disk struct {
	Root  string // the tenant's root, where the file system is mounted: absolute, clean
	Image string // the image file ([ImagePath] of Root)
	Size  int64  // bytes: the image's size, and so the file system's
}

// ImagePath is where the image of the tenant whose root is root is kept: beside the
// root, never in it (a tenant's sandboxes must not reach their own disk's bytes).
func ImagePath(root string) string { return filepath.Clean(root) + ".disk" }

// New is the disk of size bytes for the tenant whose root is root.
func New(root string, size int64) Disk {
	return Disk{Root: filepath.Clean(root), Image: ImagePath(root), Size: size}
}

// ErrGrowLater is returned by a Mount that found the disk in use and smaller than its
// quota: it is mounted as it is, and grows when it is next mounted with nothing using
// it (no session of the tenant left).
var ErrGrowLater = errors.New("the disk grows to its new quota once no session uses it")
