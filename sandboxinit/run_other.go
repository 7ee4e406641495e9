//go:build !linux && !darwin

package sandboxinit

import (
	"fmt"
	"os"

	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// Main is unimplemented off Linux.
func Main() int {
	fmt.Fprintln(os.Stderr, "cordon: internal init is unimplemented on this GOOS")
	return wire.ExitSelfCheck
}

// JoinMain is unimplemented off Linux.
func JoinMain([]string) int { return wire.ExitNotExecutable }
