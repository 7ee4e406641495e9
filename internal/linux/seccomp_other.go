//go:build !linux

package linux

import (
	"runtime"

	"golang.org/x/net/bpf"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// LoadSeccompThread fails: seccomp is a Linux facility.
func LoadSeccompThread(prog []bpf.RawInstruction) error {
	return errdefs.Unavailablef("seccomp: unimplemented on %s", runtime.GOOS)
}
