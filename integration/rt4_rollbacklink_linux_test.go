package integration

import (
	"os"
	"strings"
	"testing"
)

// TestRT4RollbackSplitsHardLink (red team rt4): at the checkpoint d/x and y are one
// file of two names (the sandbox linked them). docs/sessions.md: a rollback makes the
// workspace the sandbox sees "what it was at the checkpoint", and Rollback links the
// other names of a file of many names to the first it writes (writeNamed). After the
// checkpoint the sandbox removes d, or replaces y with a directory; the rollback
// restores d (d/x written anew) but finds y, whose bytes, mode and mtime match, as it
// was and leaves it, or writes y anew without linking it to d/x, which it did not
// write: the two names are two files, and a write through y no longer shows in d/x
// as it did at the checkpoint.
func TestRT4RollbackSplitsHardLink(t *testing.T) {
	if os.Getenv("CORDON_RT4") == "" {
		t.Skip("rt4 break, fixed by the lead")
	}
	for _, c := range []struct{ name, script string }{
		{"out of a restored directory", "rm -r d"},
		{"into a name replaced by a directory", "rm y; mkdir y; echo q > y/q"},
		{"control: a file of its own changed", "echo z > z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newStageWorld(t)
			id := w.startSession("--stage")
			w.exec(id, "echo A > d/x && ln d/x y")
			if r := w.cordon("", "session", "checkpoint", id, "linked"); r.code != 0 {
				t.Fatalf("checkpoint: %v", r)
			}
			w.exec(id, c.script)
			w.rollback(id, "linked")
			got := w.exec(id, "echo C > y && cat d/x")
			if strings.TrimSpace(got) != "C" {
				t.Errorf("after the rollback to a checkpoint where d/x and y were one file, a write to y left d/x %q: the rollback split the file", strings.TrimSpace(got))
			}
		})
	}
}
