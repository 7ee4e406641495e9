//go:build !linux

package fsdiff

import (
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// setxattr: extended attributes are set through internal/linux, which is Linux's; a
// test that needs one says so here.
func setxattr(t *testing.T, _ ws, _, _, _ string) {
	testutil.Require(t, false, "setting extended attributes is Linux-only here")
}
