package workspace

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// Red team: a pack's outcome is the sidecar's error text, and that text holds names
// a command chose: a file removed between the listing and its lstat fails the pack
// with "lstat NAME: no such file or directory", the name raw. A name with a terminal
// control sequence or a newline then reached this host's errors as it was (retries,
// the session's end detail, the supervisor's log, the operator's terminal). The
// outcome read off the stream is shown escaped, one line.
func TestRedTeamFramedOutcomeEscaped(t *testing.T) {
	evil := "a\x1b]0;owned\x07\x1b[2J\ncordon: all clean"
	var stream bytes.Buffer
	if err := WriteFramed(&stream, func(io.Writer) error {
		return &os.PathError{Op: "lstat", Path: evil, Err: errors.New("no such file or directory")}
	}); err != nil {
		t.Fatal(err)
	}
	ok, err := ReadFramed(&stream, io.Discard)
	if !ok || err == nil {
		t.Fatalf("a failed pack: %v %v", ok, err)
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\x1b\x07\n") {
		t.Errorf("the pack's outcome came through raw: %q", msg)
	}
}
