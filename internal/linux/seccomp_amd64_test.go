//go:build linux && amd64

package linux

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
)

// x32 is an amd64 ABI: this file builds on amd64 only.

// TestLoadSeccompKillsX32: a call through the x32 ABI kills the process.
func TestLoadSeccompKillsX32(t *testing.T) {
	requireSeccomp(t)
	out, err := runSeccompHelper(t, modeX32)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Errorf("helper ended with %v; want killed by SIGSYS\n%s", err, out)
	}
}
