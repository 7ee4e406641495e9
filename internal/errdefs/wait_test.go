//go:build unix

package errdefs

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
)

// TestWaitCode runs real processes that exit or are killed and checks the status each
// maps to, from its wait status and from the error its wait returned, bare and wrapped.
func TestWaitCode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		want   int
	}{
		{"exit 0", "exit 0", 0},
		{"exit 3", "exit 3", 3},
		{"exit 255", "exit 255", 255},
		{"SIGKILL", "kill -KILL $$", 128 + int(syscall.SIGKILL)},
		{"SIGTERM", "kill -TERM $$", 128 + int(syscall.SIGTERM)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", tc.script)
			err := cmd.Run()
			ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ok {
				t.Fatalf("ProcessState.Sys() is %T, not a syscall.WaitStatus", cmd.ProcessState.Sys())
			}
			if got := WaitCode(ws); got != tc.want {
				t.Errorf("WaitCode(%v) = %d; want %d", ws, got, tc.want)
			}
			if tc.want != 0 {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					t.Fatalf("Run returned %v (%T), not an *exec.ExitError", err, err)
				}
			}
			errs := []error{err}
			if err != nil {
				errs = append(errs, fmt.Errorf("running: %w", err))
			}
			for _, e := range errs {
				got, ok := ProcessCode(e)
				if !ok || got != tc.want {
					t.Errorf("ProcessCode(%v) = %d, %v; want %d, true", e, got, ok, tc.want)
				}
			}
		})
	}
}

// TestProcessCodeNotWaited: an error that is not a wait status (the program does not
// exist, a failed wait) yields no status: the caller decides what it means.
func TestProcessCodeNotWaited(t *testing.T) {
	err := exec.Command("/nonexistent/cordon-test-program").Run()
	for _, e := range []error{err, exec.ErrNotFound, errors.New("waiting: interrupted"), fmt.Errorf("x: %w", syscall.ECHILD)} {
		if got, ok := ProcessCode(e); ok {
			t.Errorf("ProcessCode(%v) = %d, true; want false", e, got)
		}
	}
}
