//go:build !linux

package layer

import "errors"

var errUnimplemented = errors.New("staged runs are unimplemented on this GOOS")

// Read is unimplemented on this GOOS.
func Read(upper string) (*Set, error) { return nil, errUnimplemented }
