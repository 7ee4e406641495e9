//go:build !linux

package layer

import (
	"errors"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

var errUnimplemented = errors.New("staged runs are unimplemented on this GOOS")

// Read is unimplemented on this GOOS.
func Read(upper, workspace string, max int) (*Set, error) { return nil, errUnimplemented }

// StateOf is unimplemented on this GOOS: it describes nothing.
func StateOf(t *linux.Tree, rel string) State { return State{} }

// Apply is unimplemented on this GOOS.
func Apply(l Landing, changes []Change) (Outcome, error) { return Outcome{}, errUnimplemented }

// EndState is unimplemented on this GOOS: it describes nothing.
func EndState(t *linux.Tree, c Change, started int64) State { return State{} }

// StartStamp is the wall clock's now on this GOOS.
func StartStamp(dir string, now time.Time) int64 { return now.UnixNano() }
