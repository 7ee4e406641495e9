//go:build !linux

package linux

import (
	"errors"
	"os"
)

var errNoTree = errors.New("landing trees are unimplemented on this GOOS")

// Tree is unimplemented on this GOOS.
type Tree struct{}

// OpenTree is unimplemented on this GOOS.
func OpenTree(dir string) (*Tree, error) { return nil, errNoTree }

// Close is unimplemented on this GOOS.
func (t *Tree) Close() error { return nil }

// OpenDirNoLinks is unimplemented on this GOOS.
func OpenDirNoLinks(p string) (*os.File, error) { return nil, errNoTree }

// FDPath is unimplemented on this GOOS.
func FDPath(f *os.File) string { return "" }
