//go:build !linux && !darwin

package pid1

import (
	"fmt"
	"os"
)

// Main is unimplemented off Linux.
func Main() int {
	fmt.Fprintln(os.Stderr, "cordon: internal init is unimplemented on this GOOS")
	return ExitSelfCheck
}

// JoinMain is unimplemented off Linux.
func JoinMain([]string) int { return ExitNotExecutable }
