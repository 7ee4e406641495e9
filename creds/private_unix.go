//go:build unix

package creds

import (
	"fmt"
	"os"
	"syscall"
)

// checkPrivate refuses a directory that another user owns or may write: the ledger
// decides what gets revoked, so nobody else may plant or remove records.
func checkPrivate(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLedger, err)
	}
	s, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || st.Mode().Perm()&0o077 != 0 || !ok || int(s.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: %s must be a directory owned by uid %d with mode 0700", ErrLedger, dir, os.Geteuid())
	}
	return nil
}
