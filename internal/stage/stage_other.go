//go:build !linux

package stage

import (
	"fmt"
	"os"
)

// Main is unimplemented off Linux.
func Main([]string) int {
	fmt.Fprintln(os.Stderr, "cordon: internal stage is unimplemented on this GOOS")
	return 125
}
