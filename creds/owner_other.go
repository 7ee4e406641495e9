//go:build !linux

package creds

import (
	"errors"
	"os"
	"syscall"
)

// processStart is unknown outside Linux.
func processStart(int) uint64 { return 0 }

// alive reports whether the process that issued a grant still runs. Without a start
// time a reused pid looks alive; when in doubt the grant is left alone (its ttl still
// ends it), never revoked under a live run.
func (o owner) alive() bool {
	if o.PID <= 0 {
		return false
	}
	p, err := os.FindProcess(o.PID)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return !errors.Is(err, os.ErrProcessDone) && !errors.Is(err, syscall.ESRCH)
}
