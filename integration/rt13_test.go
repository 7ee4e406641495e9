//go:build linux

package integration

import (
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRT13NonUTF8Name: on Linux a name is any bytes. A command writes a file below a
// directory whose name is not UTF-8 (and makes one so named), the next puts the old
// content back; the diff from the change set dropped every such path (fs.ValidPath
// rejects them), so both diffs claimed scan.watched with no change, and the written
// content was in no fs.diff of the session.
func TestRT13NonUTF8Name(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, "\xff", "f"), "original\n")
	id := w.startSession()
	exec := func(script string) {
		t.Helper()
		if r := w.cordon("", "exec", id, "--", "sh", "-c", script); r.code != 0 {
			t.Fatalf("exec %q: %v", script, r)
		}
	}
	settle(t, exec, filepath.Join(w.ws, "\xff", "f"))
	exec(`d=$(printf '\377'); printf 'evil one\n' > "$d/f"; printf 'evil two\n' > "$(printf '\376')"`)
	exec(`printf 'original\n' > "$(printf '\377')/f"; rm "$(printf '\376')"`)
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatal(r)
	}
	byCmd, between := sessionDiffs(t, w, id)
	all := between
	for _, d := range byCmd {
		all = append(all, d)
	}
	for _, content := range []string{"evil one\n", "evil two\n"} {
		sum := fmt.Sprintf("%x", sha256.Sum256([]byte(content)))
		if !anyDiffHas(all, sum) {
			t.Errorf("the write of %q below a name that is not UTF-8 is in no fs.diff: %+v", content, all)
		}
	}
}

// anyDiffHas reports whether one of diffs holds a change to the content whose digest
// is sum.
func anyDiffHas(diffs []event.FSDiffBody, sum string) bool {
	for _, d := range diffs {
		for _, c := range d.Changes {
			if c.NewSHA256 == sum {
				return true
			}
		}
	}
	return false
}
