package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRT3MmapWriteKeepsFileCapability (red team rt3; not one of today's changes): the
// workspace's tool holds security.capability (cap_net_raw+ep). A direct run writes
// the workspace's files in place; a write(2) strips a file capability (the kernel's
// killpriv), but a write through a shared mapping does not. The sandbox rewrites tool
// through mmap, and the host is left with the sandbox's content holding the
// capability, which the sandbox could not set. (Staged: the same write keeps it on
// the upper directory's copy; apply carries user.* attributes alone.)
func TestRT3MmapWriteKeepsFileCapability(t *testing.T) {
	testutil.RequireRoot(t)
	_, err := exec.LookPath("getcap")
	testutil.Require(t, err == nil, "getcap and setcap (libcap) are needed")
	_, err = exec.LookPath("python3")
	testutil.Require(t, err == nil, "python3 is needed for the mapping")
	w := newWorld(t)
	tool := filepath.Join(w.ws, "tool")
	mustWrite(t, tool, "orig\n")
	if out, err := exec.Command("setcap", "cap_net_raw+ep", tool).CombinedOutput(); err != nil {
		t.Fatalf("setcap: %v: %s", err, out)
	}
	r := w.sh(`python3 -c 'import mmap,os; fd=os.open("tool",os.O_RDWR); m=mmap.mmap(fd,5); m[:5]=b"EVIL\n"; m.flush(); m.close()'`)
	if r.code != 0 {
		t.Fatalf("the run failed: %v", r)
	}
	got, err := os.ReadFile(tool)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("getcap", tool).CombinedOutput()
	if string(got) == "EVIL\n" && strings.Contains(string(out), "cap_net_raw") {
		t.Fatalf("the workspace's tool holds the sandbox's content (%q) and still its file capability: %s", got, out)
	}
}
