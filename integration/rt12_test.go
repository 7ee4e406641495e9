//go:build linux

package integration

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// rt12Dirtier maps victim shared and writable and writes its first byte (a write
// fault: the file's mtime moves), makes mapped, then, once go appears, writes its
// second byte through the same mapping: the page is still dirty and writable in
// this process's page table, so the write faults no more and changes neither the
// file's mtime nor its ctime, nor makes any event. It makes done and holds the mapping
// until quit appears.
const rt12Dirtier = `
import mmap, os, time
fd = os.open("victim", os.O_RDWR); m = mmap.mmap(fd, 0); os.close(fd)
m[0:1] = b"A"
open("mapped", "w").close()
while not os.path.exists("go"): time.sleep(0.01)
m[1:2] = b"B"
open("done", "w").close()
while not os.path.exists("quit"): time.sleep(0.01)
`

// TestRT12DirtyMappingUnseen: a process an earlier command left holds a shared
// mapping whose page it has already dirtied; a second write through it changes the
// file's content with no event and no change of its stat data. The session then
// walks (a command left processes running), but the walk trusts stat data, so the
// file's final content must still be in some fs.diff of the session.
func TestRT12DirtyMappingUnseen(t *testing.T) {
	testutil.RequireRoot(t)
	t.Run("left running", func(t *testing.T) { testRT12DirtyMapping(t, false) })
	t.Run("a concurrent command", func(t *testing.T) { testRT12DirtyMapping(t, true) })
}

// testRT12DirtyMapping runs the dirtier left in the background by a command, or as
// a command of its own that runs while the others do (concurrent).
func testRT12DirtyMapping(t *testing.T, concurrent bool) {
	w := newWorld(t)
	victim := filepath.Join(w.ws, "victim")
	mustWrite(t, victim, "original-content\n")
	mustWrite(t, filepath.Join(w.ws, "dirtier.py"), rt12Dirtier)
	id := w.startSession()
	exec := func(script string) {
		t.Helper()
		if r := w.cordon("", "exec", id, "--", "sh", "-c", script); r.code != 0 {
			t.Fatalf("exec %q: %v", script, r)
		}
	}
	var held *bgCmd
	if concurrent {
		held = w.background("exec", id, "--", "python3", "dirtier.py")
		waitFile(t, filepath.Join(w.ws, "mapped"))
	} else {
		exec("python3 dirtier.py >/dev/null 2>&1 & i=0; while [ ! -e mapped ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; test -e mapped")
	}
	// Past the racy window of the last read of victim, and one more snapshot.
	settle(t, exec, victim)
	exec(waitDone)
	mustWrite(t, filepath.Join(w.ws, "quit"), "")
	if held != nil {
		if r := held.wait(t); r.code != 0 {
			t.Fatalf("the dirtier's command: %v", r)
		}
	}
	waitGone(t, "dirtier.py")
	exec("rm -f go done mapped quit")
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatal(r)
	}
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != "ABiginal-content\n" {
		t.Fatalf("the mapping wrote %q, not what the test expects", data)
	}
	final := fmt.Sprintf("%x", sha256.Sum256(data))
	byCmd, between := sessionDiffs(t, w, id)
	seen := false
	var walks []string
	for _, d := range append(between, mapValues(byCmd)...) {
		walks = append(walks, d.Scan.Walked)
		for _, c := range d.Changes {
			seen = seen || c.Path == "victim" && c.NewSHA256 == final
		}
	}
	if !seen {
		t.Errorf("victim's content %q (sha256 %s) is in no fs.diff of the session (walks: %q): %+v, between %+v", data, final, walks, byCmd, between)
	}
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
