//go:build !linux

package linux

import "os"

// RemoveTree removes dir and everything below it, following no link (os.RemoveAll
// here: the descriptor bound is Linux's).
func RemoveTree(dir string) error { return os.RemoveAll(dir) }
