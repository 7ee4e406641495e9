//go:build !linux

package linux

import "errors"

var errNoMountRoot = errors.New("mount points and loop devices are Linux's")

// MountRoot is Linux's.
func MountRoot(string) (bool, uint64, error) { return false, 0, errNoMountRoot }

// FSSpace is Linux's.
func FSSpace(string) (int64, int64, error) { return 0, 0, errNoMountRoot }

// FSFree is Linux's.
func FSFree(string) (int64, error) { return 0, errNoMountRoot }
