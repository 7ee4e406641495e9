// Package errdefs is cordon's small vocabulary of error categories, and the one place
// that turns an error into an exit status ([ExitCode]) and into what a person is told
// ([Message]).
//
// Packages build a categorised error with [Invalidf], [Unavailablef], [Deniedf] or
// [Unsupportedf] (fmt.Errorf's verbs, %w for causes: errors.Is and errors.As reach both
// the category and the causes); callers test the category with errors.Is. A CLI
// command that chose its own status returns a [Status].
package errdefs

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cordonhq/cordon/internal/termtext"
)

// Error categories. Test with errors.Is. Each one means cordon could not do what was
// asked (exit status [ExitCannotRun]).
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
	// ErrSandbox: the sandbox failed: its self-check, its process 1, or (a Pod) its
	// control channel or workspace. Its sites wrap it with fmt.Errorf("%w: …"), so its
	// text is part of the [Message], and the rest says what failed.
	ErrSandbox = errors.New("sandbox failed")
)

// categories are the sentinels [ExitCode] maps to [ExitCannotRun].
var categories = []error{ErrInvalid, ErrUnavailable, ErrDenied, ErrUnsupported, ErrSandbox}

// Exit codes (docs/cli.md, "Exit status"). `cordon run` and `cordon exec` exit with the
// command's own status when it ran.
const (
	ExitFailure   = 1   // a cordon command failed (check: invalid; audit verify: not intact)
	ExitUsage     = 2   // bad flags or arguments
	ExitTimeout   = 124 // the timeout killed the command
	ExitCannotRun = 125 // cordon could not run the command
	ExitMonitor   = 137 // the monitor stopped the run
)

// Invalidf is an [ErrInvalid] error: fmt.Errorf(format, args...) in that category.
func Invalidf(format string, args ...any) error {
	return &categorized{cat: ErrInvalid, err: errorf(format, args...)}
}

// Unavailablef is an [ErrUnavailable] error: fmt.Errorf(format, args...) in that
// category.
func Unavailablef(format string, args ...any) error {
	return &categorized{cat: ErrUnavailable, err: errorf(format, args...)}
}

// Deniedf is an [ErrDenied] error: fmt.Errorf(format, args...) in that category.
func Deniedf(format string, args ...any) error {
	return &categorized{cat: ErrDenied, err: errorf(format, args...)}
}

// Unsupportedf is an [ErrUnsupported] error: fmt.Errorf(format, args...) in that
// category.
func Unsupportedf(format string, args ...any) error {
	return &categorized{cat: ErrUnsupported, err: errorf(format, args...)}
}

// errorf is fmt.Errorf, except that "%w" alone is its argument itself: wrapping adds
// no context, so the [Message] stays the argument's.
func errorf(format string, args ...any) error {
	if format == "%w" && len(args) == 1 {
		if err, ok := args[0].(error); ok {
			return err
		}
	}
	return fmt.Errorf(format, args...)
}

// categorized is an error in a category. Its Error text, for logs, is "category:
// message"; its [Message], for people, is the message alone (the category is what the
// exit status says).
type categorized struct {
	cat error // one of the categories
	err error // the message, wrapping its causes
}

func (e *categorized) Error() string   { return e.cat.Error() + ": " + e.err.Error() }
func (e *categorized) Unwrap() []error { return []error{e.cat, e.err} }
func (e *categorized) message() string { return Message(e.err) }

// Join is errors.Join whose [Message] is each error's, one per line.
func Join(errs ...error) error {
	j := errors.Join(errs...)
	if j == nil {
		return nil
	}
	return &joined{j.(interface{ Unwrap() []error }).Unwrap()}
}

// joined is [Join]'s error.
type joined struct{ errs []error }

func (j *joined) Error() string   { return errors.Join(j.errs...).Error() }
func (j *joined) Unwrap() []error { return j.errs }

func (j *joined) message() string {
	lines := make([]string, len(j.errs))
	for i, e := range j.errs {
		lines[i] = Message(e)
	}
	return strings.Join(lines, "\n")
}

// Status is an error that carries the status cordon exits with: the command's own, or
// one a CLI command chose (ExitFailure for a contract that failed its check,
// ExitUsage for bad arguments). Err, when set, is what to tell the person; nil when
// there is nothing to say, or it has been said.
type Status struct {
	Code int
	Err  error
}

// Exit is a [Status] with nothing more to say.
func Exit(code int) error { return &Status{Code: code} }

// Exitf is a [Status] whose message is fmt.Errorf(format, args...).
func Exitf(code int, format string, args ...any) error {
	return &Status{Code: code, Err: errorf(format, args...)}
}

// Usagef is a usage error ([ExitUsage]) whose message is fmt.Errorf(format, args...).
func Usagef(format string, args ...any) error {
	return &Status{Code: ExitUsage, Err: errorf(format, args...)}
}

func (e *Status) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *Status) Unwrap() error { return e.Err }

// ExitStatus implements the interface [ExitCode] looks for.
func (e *Status) ExitStatus() int { return e.Code }

func (e *Status) message() string { return Message(e.Err) }

// CannotRun is err as the failure of `cordon run` or `cordon exec`: an error that
// carries no status or category of its own exits [ExitCannotRun] too, as docs/cli.md
// says of every way cordon fails to run the command.
func CannotRun(err error) error {
	if err == nil || carriesStatus(err) || inCategory(err) {
		return err
	}
	return &Status{Code: ExitCannotRun, Err: err}
}

// Reported is err once its [Message] has been told: the same exit status, nothing
// more to say.
func Reported(err error) error {
	if err == nil {
		return nil
	}
	return &Status{Code: ExitCode(err)}
}

// ExitCode is the status cordon exits with for err: 0 for nil; the status an error in
// the chain carries (an ExitStatus() int method: [Status], a session client's error);
// [ExitCannotRun] for an error in one of the categories; else [ExitFailure].
func ExitCode(err error) int {
	var st interface{ ExitStatus() int }
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return st.ExitStatus()
	case inCategory(err):
		return ExitCannotRun
	}
	return ExitFailure
}

func carriesStatus(err error) bool {
	var st interface{ ExitStatus() int }
	return errors.As(err, &st)
}

func inCategory(err error) bool {
	for _, c := range categories {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

// Message is what cordon tells a person about err (printed "cordon: " + each line). It
// is built from err's structure, never by editing its text: the errors of this package
// leave their category out (the exit status says it) and a [Status] says what it
// carries ("" when nothing); any other error says its Error text, whole, because the
// context a wrapper adds ("credentials: …") is part of the story.
func Message(err error) string {
	if err == nil {
		return ""
	}
	// Only the outermost error decides: an inner one's message would drop the
	// context its wrappers add.
	// Messages name paths, hosts and commands the sandbox may have chosen: printed as
	// they are, one could drive the terminal (termtext).
	if m, ok := err.(interface{ message() string }); ok {
		return termtext.Text(m.message())
	}
	return termtext.Text(err.Error())
}
