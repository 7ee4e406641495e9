//go:build !unix

package creds

import (
	"fmt"
	"os"
)

// checkPrivate checks only that dir is a directory: file ownership is not portable.
func checkPrivate(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrLedger, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%w: %s is not a directory", ErrLedger, dir)
	}
	return nil
}
