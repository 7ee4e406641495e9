package creds

import (
	"fmt"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

const oNoFollow = syscall.O_NOFOLLOW

// Filesystem magic numbers (statfs f_type) of filesystems that live in memory.
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

func checkTmpfs(dir string) error {
	t, err := linux.FilesystemType(dir)
	if err != nil {
		return fmt.Errorf("credential files directory: %w", err)
	}
	if t != tmpfsMagic && t != ramfsMagic {
		return fmt.Errorf("credential files directory %s: %w (filesystem type %#x)", dir, ErrNotTmpfs, t)
	}
	return nil
}
