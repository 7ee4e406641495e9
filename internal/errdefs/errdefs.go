// Package errdefs is cordon's small vocabulary of error categories. Packages wrap one of
// these sentinels with %w; the CLI maps categories to exit codes in one place.
package errdefs

import "errors"

// Error categories. Test with errors.Is.
var (
	// ErrInvalid: the input (contract, flags, arguments) is wrong; fix it and retry.
	ErrInvalid = errors.New("invalid")
	// ErrUnavailable: a mechanism cordon needs (bwrap, user namespaces, an engine,
	// cgroups) is missing on this host; cordon refuses rather than run unsandboxed.
	ErrUnavailable = errors.New("unavailable")
	// ErrDenied: the contract refuses what was asked (a denied command pattern).
	ErrDenied = errors.New("denied by contract")
	// ErrUnsupported: the contract uses a feature this cordon parses but cannot
	// enforce yet; running would silently ignore it, so cordon refuses.
	ErrUnsupported = errors.New("not supported yet")
	// ErrSandbox: the sandbox was built but failed its self-check.
	ErrSandbox = errors.New("sandbox self-check failed")
)

// Exit codes of `cordon run` and `cordon exec` (DESIGN.md).
const (
	ExitTimeout   = 124 // the timeout killed the command
	ExitCannotRun = 125 // cordon could not run the command
	ExitMonitor   = 137 // the monitor stopped the run
)
