package contract

import (
	"strings"
	"testing"
)

// A path in a problem (one the sandbox may have named, through a link in the
// workspace) cannot start a second problem line or drive the terminal.
func TestErrorIsOneLine(t *testing.T) {
	e := &Error{File: "c.yaml", Pos: Pos{Line: 3, Col: 5}, Msg: "filesystem.readable: /w/x\nc.yaml:1:1: forged\x1b[2J does not exist"}
	got := e.Error()
	if strings.ContainsAny(got, "\n\x1b") {
		t.Fatalf("Error() = %q: holds a newline or an escape", got)
	}
	if want := `c.yaml:3:5: filesystem.readable: /w/x\x0ac.yaml:1:1: forged\x1b[2J does not exist`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
