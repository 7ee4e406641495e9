package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRT3RollbackSetsCapabilityOnSandboxFile (red team rt3): a rollback restores
// want's extended attributes (rollback.restoreAttrs) by the entry's name, after
// syncOne has written it, while the sandbox keeps running. The workspace's tool holds
// security.capability (cap_net_raw+ep), which the sandbox cannot set. The sandbox
// rewrites tool, then swaps a file of its own (evil2) over tool in a loop; each
// rollback to a checkpoint taken before then writes the workspace's tool and sets
// security.capability by name, landing, once the swap falls between the two, on the
// sandbox's file: root's cordon has given the sandbox's own content a file
// capability in the upper directory. Seen by hand in 1 of 8 rollbacks, 0 of 30 in
// another try (the race is the whole test). It must never happen.
func TestRT3RollbackSetsCapabilityOnSandboxFile(t *testing.T) {
	_, err := exec.LookPath("getcap")
	testutil.Require(t, err == nil, "getcap and setcap (libcap) are needed")
	w := newStageWorld(t)
	tool := filepath.Join(w.ws, "tool")
	mustWrite(t, tool, "orig\n")
	if out, err := exec.Command("setcap", "cap_net_raw+ep", tool).CombinedOutput(); err != nil {
		t.Fatalf("setcap: %v: %s", err, out)
	}
	id := w.startSession("--stage")
	defer w.cordon("", "session", "stop", id)
	if r := w.cordon("", "session", "checkpoint", id, "c0"); r.code != 0 {
		t.Fatalf("checkpoint: %v", r)
	}
	w.exec(id, "echo evil > tool")
	w.exec(id, `nohup sh -c 'while [ ! -e stop ]; do printf "evil2\n" > .t; mv -f .t tool; `+
		`if [ "$(cat tool)" = evil2 ] && getcap tool | grep -q net_raw; then echo WON > won; break; fi; done' >/dev/null 2>&1 &`)
	defer w.cordon("", "exec", id, "--", "touch", "stop")
	for i := 0; i < 60; i++ {
		if r := w.cordon("", "session", "rollback", id, "c0"); r.code != 0 {
			t.Fatalf("rollback %d: %v", i, r)
		}
		r := w.cordon("", "exec", id, "--", "sh", "-c", "cat won 2>/dev/null; true")
		if strings.Contains(r.stdout, "WON") {
			t.Fatalf("rollback %d set security.capability on the sandbox's own file (content evil2)", i)
		}
	}
}
