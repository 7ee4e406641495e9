package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Red team 11 (rt11) against the change set of a direct one-command run as root
// (issue 39): the diff reads again only what the kernel reported changed, and the
// command starts behind a barrier while the baseline is read. Each attack changes a
// workspace file; the change must be in the run's fs.diff with the content the file
// really has, or the diff must have walked and said why.

// rt11Changed is the diff's path -> new digest ("" for a change with none).
func rt11Changed(d *audit.FSDiff) map[string]string {
	got := map[string]string{}
	for _, c := range d.Changes {
		got[c.Path] = c.NewSHA256
	}
	return got
}

// rt11AssertSeen fails unless rel, whose content was was before the run, is either
// unchanged or in the diff with its real digest.
func rt11AssertSeen(t *testing.T, w *world, d *audit.FSDiff, rel, was string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(w.ws, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := rt11Changed(d)[rel]
	sum := sha256.Sum256(data)
	switch {
	case string(data) == was:
		t.Logf("%s unchanged", rel)
	case !ok:
		t.Errorf("%s changed (%d bytes, %q…) but is not in the diff (scan %+v, %d changes)", rel, len(data), firstBytes(data), d.Scan, len(d.Changes))
	case got != "" && got != hex.EncodeToString(sum[:]):
		t.Errorf("%s is in the diff with digest %s, its content has %x", rel, got, sum)
	}
}

// TestRT11CoreDumpDuringBaseline: the kernel writes a crashing process's core file
// into its working directory (core_pattern "core", the kernel's default) with no
// system call of the command's: the barrier holds none. The command raises its core
// limit (setrlimit: not held), crashes a child in the last directory the baseline
// reads, and the kernel replaces bulk/63/core (it unlinks an existing one first)
// while the baseline is still being read. The baseline then records the dump as the
// old content, and the diff, which reads the path again, finds it unchanged. BROKE
// (the diff was empty); fixed: process 1 gives a command with a barrier RLIMIT_CORE 0,
// soft and hard, which it has no capability to raise.
func TestRT11CoreDumpDuringBaseline(t *testing.T) {
	testutil.RequireRoot(t)
	pattern, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	t.Logf("core_pattern %q", pattern) // a pipe's helper may write into the directory too (apport)
	w := newWorld(t)
	sharedBulk(t, w)
	const was = "old core\n"
	mustWrite(t, filepath.Join(w.ws, "bulk", "63", "core"), was)
	t.Cleanup(func() { os.Remove(filepath.Join(w.ws, "bulk", "63", "core")) })
	r := w.cordon("", "run", "-v", "--", "sh", "-c", `cd bulk/63 && ulimit -c unlimited ; sh -c 'kill -SEGV $$'; echo done`)
	if !strings.Contains(r.stdout, "done") {
		t.Fatalf("run: %v", r)
	}
	if heldCalls(r.stderr) < 0 {
		t.Fatalf("the run had no barrier:\n%s", r.stderr)
	}
	_, d := runEvents(t, w)
	if d == nil {
		t.Fatal("no fs.diff")
	}
	t.Logf("scan %+v changes %v", d.Scan, rt11Changed(d))
	rt11AssertSeen(t, w, d, "bulk/63/core", was)
}
