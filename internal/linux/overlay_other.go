//go:build !linux

package linux

import (
	"errors"
	"os"
)

var errNoOverlay = errors.New("overlay file systems are unimplemented on this GOOS")

// NewOverlay is unimplemented on this GOOS.
func NewOverlay(lower, upper, work *os.File) (*os.File, error) { return nil, errNoOverlay }

// NewOverlayView is unimplemented on this GOOS.
func NewOverlayView(layers ...*os.File) (*os.File, error) { return nil, errNoOverlay }

// Unmount is unimplemented on this GOOS.
func Unmount(target string) error { return errNoOverlay }

// UnmountBelow has nothing to do on this GOOS: cordon mounts nothing there.
func UnmountBelow(dir string) error { return nil }
