//go:build !linux

package disk

import (
	"context"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// Mount is Linux's: loop devices and ext4 exist nowhere else.
func Mount(context.Context, Disk) error {
	return errdefs.Unsupportedf("a tenant's disk (quotas.disk) needs Linux; set quotas.disk to host")
}

// Unmount is Linux's.
func Unmount(string) error { return nil }

// Space is Linux's.
func Space(string) (int64, int64, error) {
	return 0, 0, errdefs.Unsupportedf("a tenant's disk needs Linux")
}
