package errdefs_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// statusErr is a foreign error that carries its own status, as client.Error does.
type statusErr struct{ code int }

func (e statusErr) Error() string   { return "session said no" }
func (e statusErr) ExitStatus() int { return e.code }

func TestExitCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"plain", errors.New("boom"), errdefs.ExitFailure},
		{"invalid", errdefs.Invalidf("bad"), errdefs.ExitCannotRun},
		{"unavailable", errdefs.Unavailablef("docker: %w", fs.ErrNotExist), errdefs.ExitCannotRun},
		{"denied", errdefs.Deniedf("no"), errdefs.ExitCannotRun},
		{"unsupported", errdefs.Unsupportedf("later"), errdefs.ExitCannotRun},
		{"sandbox, wrapped by fmt", fmt.Errorf("%w: pid 1 died", errdefs.ErrSandbox), errdefs.ExitCannotRun},
		{"category under a wrapper", fmt.Errorf("credentials: %w", errdefs.Invalidf("bad")), errdefs.ExitCannotRun},
		{"the command's status", errdefs.Exit(3), 3},
		{"status zero", errdefs.Exit(0), 0},
		{"usage", errdefs.Usagef("want one ID"), errdefs.ExitUsage},
		{"status beats its category", &errdefs.Status{Code: errdefs.ExitUsage, Err: errdefs.Invalidf("no command")}, errdefs.ExitUsage},
		{"a foreign status", fmt.Errorf("exec: %w", statusErr{7}), 7},
		{"cannot run: plain", errdefs.CannotRun(errors.New("boom")), errdefs.ExitCannotRun},
		{"cannot run keeps a status", errdefs.CannotRun(errdefs.Usagef("x")), errdefs.ExitUsage},
		{"cannot run keeps a status of 1", errdefs.CannotRun(statusErr{1}), errdefs.ExitFailure},
		{"cannot run keeps a category", errdefs.CannotRun(errdefs.Deniedf("no")), errdefs.ExitCannotRun},
		{"cannot run of nil", errdefs.CannotRun(nil), 0},
		{"reported", errdefs.Reported(errdefs.Unavailablef("x")), errdefs.ExitCannotRun},
		{"joined", errdefs.Join(errors.New("a"), errdefs.Unavailablef("b")), errdefs.ExitCannotRun},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errdefs.ExitCode(tt.err); got != tt.want {
				t.Errorf("ExitCode(%v) = %d; want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	inner := errdefs.Invalidf("scope: required")
	tests := []struct {
		name      string
		err       error
		text, msg string // Error() (logs) and Message (people)
	}{
		{"nil", nil, "", ""},
		{"plain", errors.New("boom"), "boom", "boom"},
		{"category left out", errdefs.Unavailablef("docker: %w", errors.New("no engine")), "unavailable: docker: no engine", "docker: no engine"},
		{"denied", errdefs.Deniedf("command denied by contract rule %q", "curl *"), `denied by contract: command denied by contract rule "curl *"`, `command denied by contract rule "curl *"`},
		{"%w alone is its argument", errdefs.Invalidf("%w", errdefs.Unavailablef("x")), "invalid: unavailable: x", "x"},
		{"a wrapper's context is kept", fmt.Errorf("credentials: %w", inner), "credentials: invalid: scope: required", "credentials: invalid: scope: required"},
		{"sandbox says what failed", fmt.Errorf("%w: pid 1 died", errdefs.ErrSandbox), "sandbox failed: pid 1 died", "sandbox failed: pid 1 died"},
		{"status with a message", errdefs.Usagef("gate %s: want one ID", "show"), "gate show: want one ID", "gate show: want one ID"},
		{"status with nothing to say", errdefs.Exit(1), "exit status 1", ""},
		{"status around a category", &errdefs.Status{Code: 2, Err: errdefs.Invalidf("no command given")}, "invalid: no command given", "no command given"},
		{"cannot run", errdefs.CannotRun(errors.New("mkdir: denied")), "mkdir: denied", "mkdir: denied"},
		{"reported", errdefs.Reported(errors.New("said")), "exit status 1", ""},
		{"joined, one message per line", errdefs.Join(errdefs.Unavailablef("a"), nil, errors.New("b")), "unavailable: a\nb", "a\nb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err != nil && tt.err.Error() != tt.text {
				t.Errorf("Error() = %q; want %q", tt.err.Error(), tt.text)
			}
			if got := errdefs.Message(tt.err); got != tt.msg {
				t.Errorf("Message = %q; want %q", got, tt.msg)
			}
		})
	}
}

// TestBothWrapped: a categorised error reaches its category and its cause.
func TestBothWrapped(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrPermission}
	err := fmt.Errorf("starting: %w", errdefs.Unavailablef("docker: %w", cause))
	var pe *fs.PathError
	if !errors.Is(err, errdefs.ErrUnavailable) || !errors.As(err, &pe) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("%v: want ErrUnavailable and the *fs.PathError through the chain", err)
	}
	if errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("%v is not ErrInvalid", err)
	}
	var st *errdefs.Status
	if !errors.As(errdefs.CannotRun(cause), &st) || !errors.Is(st, fs.ErrPermission) {
		t.Errorf("CannotRun: want a *Status wrapping the cause")
	}
}

// A message names what the sandbox chose (paths, hosts): it cannot drive the terminal.
func TestMessageEscapesTerminalControls(t *testing.T) {
	err := errdefs.Unavailablef("opening %s", "x\x1b]0;pwned\x07\u202ey")
	if got, want := errdefs.Message(err), `opening x\x1b]0;pwned\x07\u202ey`; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
	if got := errdefs.Message(errors.New("line one\nline two")); got != "line one\nline two" {
		t.Errorf("Message dropped a line break of a multi-line error: %q", got)
	}
}
