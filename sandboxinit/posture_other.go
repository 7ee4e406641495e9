//go:build !linux

package sandboxinit

import (
	"fmt"
	"os"
)

// PostureMain is unimplemented off Linux.
func PostureMain([]string) int {
	fmt.Fprintln(os.Stderr, "cordon: internal posture is unimplemented on this GOOS")
	return 2
}
