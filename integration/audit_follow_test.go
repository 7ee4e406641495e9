package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestAuditFollowStreamsASession follows a live session's log into a unix socket a
// collector listens on: every line arrives as it is logged, the stream ends at the
// run.end seal with exit 0, and what the collector got is the log byte for byte.
func TestAuditFollowStreamsASession(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	sock := filepath.Join(shortTempDir(t), "collector.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	follow := exec.CommandContext(ctx, testutil.Cordon(t), "audit", "follow", "-o", "unix:"+sock, id)
	follow.Dir, follow.Env = w.ws, w.env
	var stderr strings.Builder
	follow.Stderr = &stderr
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(conn)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	wantType := func(typ string) {
		t.Helper()
		for line := range lines {
			var rec struct{ Type string }
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("collector got %q: %v", line, err)
			}
			if rec.Type == typ {
				return
			}
		}
		t.Fatalf("stream ended before a %s line (stderr %s)", typ, stderr.String())
	}
	wantType("run.start")
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo streamed > f.txt"); r.code != 0 {
		t.Fatalf("exec: %v", r)
	}
	wantType("cmd.end") // while the session still runs
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	wantType("run.end")
	if err := follow.Wait(); err != nil {
		t.Fatalf("audit follow: %v: %s", err, stderr.String())
	}
	if _, ok := <-lines; ok {
		t.Error("lines after run.end")
	}
	// A sealed run is followed from its first line to its seal at once; ocsf to stdout.
	r := w.cordon("", "audit", "follow", "--format", "ocsf", id)
	if r.code != 0 || !strings.Contains(r.stdout, `"class_uid":`) {
		t.Fatalf("follow of a sealed run: %v", r)
	}
}

// TestAuditFollowRefusesBadLogs: a line that does not verify stops the stream before it
// (exit 1), and a crashed run's unsealed log ends with exit 1 instead of waiting forever.
func TestAuditFollowRefusesBadLogs(t *testing.T) {
	w := newWorld(t)
	if r := w.sh("echo one; echo two"); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	runs, err := audit.List(w.auditRoot())
	if err != nil || len(runs) == 0 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	path := filepath.Join(w.auditRoot(), runs[0].ID, audit.EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), `"echo one; echo two"`, `"echo one; echo 2wo"`, 1)
	mustWrite(t, path, edited)
	r := w.cordon("", "audit", "follow", "last")
	if r.code != 1 || !strings.Contains(r.stderr, "NOT INTACT") || strings.Contains(r.stdout, "2wo") {
		t.Errorf("follow of an edited log: %v", r)
	}
	body := strings.TrimSuffix(string(data), "\n")
	mustWrite(t, path, body[:strings.LastIndex(body, "\n")+1]) // no run.end, no live owner
	done := make(chan result, 1)
	go func() { done <- w.cordon("", "audit", "follow", "last") }()
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("follow of a crashed run's log did not end")
	}
	if r.code != 1 || !strings.Contains(r.stderr, "no run.end seal") {
		t.Errorf("follow of an unsealed log: %v", r)
	}
}

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
	// The listener takes one connection: when follow has refused to connect, the test
	// is that one (and sends nothing), so the run ends now rather than at its timeout.
	if c, err := net.Dial("unix", filepath.Join(w.ws, "col.sock")); err == nil {
		c.Close()
	}
	run.Wait()
	stolen, _ := os.ReadFile(filepath.Join(w.ws, "stolen.jsonl"))
	if len(stolen) > 0 {
		t.Errorf("the sandbox's socket got %d bytes of its run's live log (the alert's reason seen: %v)", len(stolen), strings.Contains(string(stolen), `"reason":"read of a hidden path`))
	}
}

// TestRedFollowSocketAnsweredByAnotherUID (red team, issue 34 §6): audit follow -o
// unix:PATH checked only the owner of the socket file (stat by name), then dialled the
// name, and never asked who answered (SO_PEERCRED). Another local user who can rename
// a socket of its own over PATH between the two (a directory it can write) received
// the run's whole log. The rename race is stood in for here without a race: the other
// user's socket file is given to the caller (chown), so the file check passes and only
// a check of the peer can refuse it.
func TestRedFollowSocketAnsweredByAnotherUID(t *testing.T) {
	testutil.RequireRoot(t)
	const other = "64102"
	w := newWorld(t)
	w.contract("version: 1\n")
	if r := w.sh("echo ran"); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	dir, err := os.MkdirTemp("/var/tmp", "cordon-red-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 64102, 64102); err != nil {
		t.Fatal(err)
	}
	sock, got, ready := filepath.Join(dir, "col.sock"), filepath.Join(dir, "got"), filepath.Join(dir, "ready")
	listener := `import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1); open(sys.argv[3], "w").close()
s.settimeout(10); c, _ = s.accept(); c.settimeout(5); d = b""
try:
    while len(d) < 1 << 20:
        x = c.recv(65536)
        if not x: break
        d += x
except Exception: pass
open(sys.argv[2], "wb").write(d)
`
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l := exec.CommandContext(ctx, "setpriv", "--reuid", other, "--regid", other, "--clear-groups",
		"/usr/bin/python3", "-c", listener, sock, got, ready)
	l.Dir = dir
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Process.Kill(); _ = l.Wait() }()
	waitFor(t, 30*time.Second, "the other user's listener", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	if err := os.Chown(sock, 0, 0); err != nil {
		t.Fatal(err)
	}
	follow := exec.CommandContext(ctx, testutil.Cordon(t), "audit", "follow", "-o", "unix:"+sock, "last")
	follow.Dir, follow.Env = w.ws, w.env
	out, ferr := follow.CombinedOutput()
	_ = l.Wait() // the listener ends at EOF, or 10s after cordon never connected
	stolen, _ := os.ReadFile(got)
	if len(stolen) > 0 {
		t.Errorf("uid %s, answering on a socket file root owns, received %d bytes of root's run log (follow: %v, %s)", other, len(stolen), ferr, out)
	}
	if ferr == nil || !strings.Contains(string(out), "answered by uid "+other) {
		t.Errorf("audit follow must refuse the socket answered by uid %s: %v, %s", other, ferr, out)
	}
}
