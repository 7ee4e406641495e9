//go:build !linux

package ctlmux

import (
	"errors"
	"os"
)

// checkListener refuses every listener: only Linux runs a Pod's relay.
func checkListener(*os.File) (byte, error) {
	return 0, errors.New("a relayed listener is unimplemented on this GOOS")
}
