//go:build !linux

package linux

import (
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// LoadSeccompThread fails: seccomp is a Linux facility.
func LoadSeccompThread(prog []bpf.RawInstruction) error {
	return fmt.Errorf("%w: seccomp: unimplemented on %s", errdefs.ErrUnavailable, runtime.GOOS)
}
