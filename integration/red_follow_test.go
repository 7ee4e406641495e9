package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRedFollowOutputThroughASymlinkedWorkspacePath (red team): -o FILE in
// the run's workspace is opened through an os.Root only when its absolute path is
// lexically under the workspace as the log records it (resolved). From the same
// workspace reached by another name (a symlinked project directory, macOS /tmp, a
// Fedora /home), -o out/x.jsonl is not recognised and a directory link the sandbox
// planted is followed: the file is created outside the workspace.
func TestRedFollowOutputThroughASymlinkedWorkspacePath(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	outside := t.TempDir()
	link := filepath.Join(t.TempDir(), "project")
	if err := os.Symlink(w.ws, link); err != nil {
		t.Fatal(err)
	}
	w.contract("version: 1\n")
	if r := w.sh("ln -s " + outside + " out"); r.code != 0 {
		t.Fatalf("planting: %v", r)
	}
	cmd := exec.Command(testutil.Cordon(t), "audit", "follow", "-o", "out/x.jsonl", "last")
	cmd.Dir, cmd.Env = link, append(append([]string(nil), w.env...), "PWD="+link)
	out, err := cmd.CombinedOutput()
	if _, serr := os.Stat(filepath.Join(outside, "x.jsonl")); serr == nil {
		t.Errorf("audit follow -o out/x.jsonl from %s (exit %v, %s) wrote through the sandbox's link into %s", link, err, out, outside)
	}
}

// TestRedFollowSocketPlantedByTheSandbox (red team): -o unix:PATH in the
// workspace dials whatever socket is there; the workload listening on it receives its
// run's whole log as it is written, including each syscall.alert's reason (the
// contract's wording), which the summary is careful never to show it.
func TestRedFollowSocketPlantedByTheSandbox(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, cat, \"python3*\"]}\n")
	listener := `import socket
s = socket.socket(socket.AF_UNIX); s.bind("col.sock"); s.listen(1); open("ready", "w").close()
c, _ = s.accept(); c.settimeout(3); d = b""
try:
    while len(d) < 1 << 20:
        x = c.recv(65536)
        if not x: break
        d += x
except Exception: pass
open("stolen.jsonl", "wb").write(d)
`
	mustWrite(t, filepath.Join(w.ws, "listen.py"), listener)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, testutil.Cordon(t), "run", "--", "sh", "-c", "cat /etc/shadow 2>/dev/null; /usr/bin/python3 listen.py")
	run.Dir, run.Env = w.ws, w.env
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer run.Wait()
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(filepath.Join(w.ws, "ready")); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	follow := exec.CommandContext(ctx, testutil.Cordon(t), "audit", "follow", "-o", "unix:"+filepath.Join(w.ws, "col.sock"), "last")
	follow.Dir, follow.Env = w.ws, w.env
	follow.Run()
	run.Wait()
	stolen, _ := os.ReadFile(filepath.Join(w.ws, "stolen.jsonl"))
	if len(stolen) > 0 {
		t.Errorf("the sandbox's socket got %d bytes of its run's live log (the alert's reason seen: %v)", len(stolen), strings.Contains(string(stolen), `"reason":"read of a hidden path`))
	}
}
