//go:build !linux

package workspace

import (
	"errors"
	"io"
)

var errUnsupported = errors.New("server workspaces are unimplemented on this GOOS")

// Unpack is unimplemented on this GOOS.
func Unpack(io.Reader, string, Limits) (Stats, error) { return Stats{}, errUnsupported }

// Pack is unimplemented on this GOOS.
func Pack(io.Writer, string, Limits) (Stats, int, error) { return Stats{}, 0, errUnsupported }

// Sync is unimplemented on this GOOS.
func Sync(io.Reader, string, Limits, func(string) bool) (Stats, error) {
	return Stats{}, errUnsupported
}

// UnpackAsCaller is unimplemented on this GOOS.
func UnpackAsCaller(io.Reader, string, Limits, func(string) bool) (Stats, error) {
	return Stats{}, errUnsupported
}

// PackOnly is unimplemented on this GOOS.
func PackOnly(io.Writer, string, Limits, func(string) bool) (Stats, int, error) {
	return Stats{}, 0, errUnsupported
}

// SyncFrom is unimplemented on this GOOS.
func SyncFrom(io.Reader, string, Limits, func(string) bool, bool) (Synced, error) {
	return Synced{}, errUnsupported
}
