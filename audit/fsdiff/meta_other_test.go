//go:build !linux

package fsdiff

import "testing"

// setxattr: extended attributes are set through internal/linux, which is Linux's; a
// test that needs one says so here.
func setxattr(t *testing.T, _ ws, _, _, _ string) {
	t.Skip("setting extended attributes is Linux-only here")
}
