//go:build !linux

package hostexec

import "github.com/cordonhq/cordon/internal/errdefs"

// Resolve is unimplemented on this GOOS: cordon runs no contract-named program on
// the host where it cannot check it.
func Resolve(name, path string, pol Policy) (*Program, error) {
	return nil, errdefs.Unsupportedf("running a contract-named program on the host is unimplemented on this GOOS")
}
