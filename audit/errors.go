package audit

import (
	"errors"
	"fmt"
)

// Errors returned by this package. Callers test them with errors.Is: for example a
// runner maps ErrRootUnwritable to exit code 125, and `cordon audit verify` reports which
// of ErrEdited, ErrMissing, ErrReordered, ErrTruncated, ErrMalformed or
// ErrUnsupportedVersion a [VerifyError] is.
var (
	// ErrRootUnwritable: the audit root or the run directory cannot be created or written.
	ErrRootUnwritable = errors.New("audit root not writable")
	// ErrInvalidRunID: a run id is not of the form 20261129T201530Z-3fa9c1.
	ErrInvalidRunID = errors.New("invalid run id")
	// ErrRunExists: Create was given the id of an existing run.
	ErrRunExists = errors.New("run already exists")
	// ErrRunNotFound: Open found no such run under the root.
	ErrRunNotFound = errors.New("run not found")
	// ErrClosed: the writer was closed (sealed); the event was not written.
	ErrClosed = errors.New("audit log closed")
	// ErrWriterFailed: an earlier write failed; the writer accepts no more events.
	ErrWriterFailed = errors.New("audit log failed")
	// ErrBadEvent: an event cannot be logged (no type, a reserved type, a body that does
	// not encode to a JSON object).
	ErrBadEvent = errors.New("bad event")
	// ErrBadSecret: a secret cannot be registered for redaction (too short, not UTF-8,
	// or an invalid name).
	ErrBadSecret = errors.New("bad secret")
	// ErrBadPrune: Prune was given no rule, or a negative one.
	ErrBadPrune = errors.New("bad prune rule")
	// ErrBadFormat: Export was asked for a format it does not write.
	ErrBadFormat = errors.New("unknown export format")

	// ErrEdited: a line's hash does not match its content, or a patch file does not match
	// the digest recorded for it.
	ErrEdited = errors.New("edited")
	// ErrMissing: a line (or a patch file) is missing: a gap in the sequence.
	ErrMissing = errors.New("missing line")
	// ErrReordered: lines are out of order, or a line does not chain to the one before.
	ErrReordered = errors.New("reordered")
	// ErrTruncated: the log ends with a partial line or without the run.end seal.
	ErrTruncated = errors.New("truncated")
	// ErrMalformed: a line is not a record in canonical form, or breaks a structural rule
	// (run.start first, one run id, nothing after run.end).
	ErrMalformed = errors.New("malformed")
	// ErrUnsupportedVersion: a line has a schema version this build does not know.
	ErrUnsupportedVersion = errors.New("unsupported schema version")
)

// VerifyError is the first problem Verify found in a log.
type VerifyError struct {
	Line   int    // 1-based line number in events.jsonl; the line count + 1 for "missing seal"
	Kind   error  // ErrEdited, ErrMissing, ErrReordered, ErrTruncated, ErrMalformed or ErrUnsupportedVersion
	Detail string // what exactly is wrong, for people
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("line %d: %v: %s", e.Line, e.Kind, e.Detail)
}

// Is maps e to its sentinel, so errors.Is(err, ErrEdited) works through wrapping.
func (e *VerifyError) Is(target error) bool { return target == e.Kind }
