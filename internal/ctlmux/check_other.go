//go:build !linux

package ctlmux

import (
	"errors"
	"os"
)

// checkListener refuses every listener: only Linux runs a Pod's relay.
func checkListener(*os.File) error {
	return errors.New("an egress listener is unimplemented on this GOOS")
}
