//go:build !linux

package sandboxinit

import (
	"fmt"
	"os"
)

// HoldMain is unimplemented off Linux (a Pod's process 1 runs on Linux).
func HoldMain([]string) int {
	fmt.Fprintln(os.Stderr, "cordon: internal hold is unimplemented on this GOOS")
	return 1
}

// InstallMain is unimplemented off Linux.
func InstallMain([]string) int {
	fmt.Fprintln(os.Stderr, "cordon: internal install is unimplemented on this GOOS")
	return 1
}
