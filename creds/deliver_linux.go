package creds

import (
	"fmt"
	"syscall"
)

const oNoFollow = syscall.O_NOFOLLOW

// Filesystem magic numbers (statfs f_type) of filesystems that live in memory.
const (
	tmpfsMagic = 0x01021994
	ramfsMagic = 0x858458f6
)

func checkTmpfs(dir string) error {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return fmt.Errorf("credential files directory: %w", err)
	}
	// f_type's Go type differs by architecture; the magic numbers are 32 bits.
	if t := uint32(st.Type); t != tmpfsMagic && t != ramfsMagic {
		return fmt.Errorf("credential files directory %s: %w (filesystem type %#x)", dir, ErrNotTmpfs, t)
	}
	return nil
}
