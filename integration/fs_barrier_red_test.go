package integration

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// The barrier holds the command's own calls that may change a file until the
// baseline is read. These attacks change the workspace during the baseline through
// something the barrier does not hold: a write made for the command by a process
// outside the sandbox. Had the command waited for the baseline (as it does without a
// barrier), each change would come after the baseline and be in the diff.

// diffOps is the diff's path -> op.
func diffOps(t *testing.T, w *world) (map[string]string, bool) {
	t.Helper()
	_, diff := runEvents(t, w)
	if diff == nil {
		t.Fatal("no fs.diff")
	}
	got := map[string]string{}
	for _, c := range diff.Changes {
		got[c.Path] = c.Op
	}
	return got, diff.Scan.Unread
}

// TestRedBarrierStdoutIntoWorkspace: the caller sends the run's output to a file of
// the workspace (`cordon run -- make > build.log`, with build.log in the checkout).
// cordon copies the command's output there as it comes, which is now while the
// baseline is still being read: a baseline that reads the file after the write
// records the new content as the old, and the diff says nothing changed.
func TestRedBarrierStdoutIntoWorkspace(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sharedBulk(t, w)
	// The last directory the walk reads: the write comes long before it.
	out := filepath.Join(w.ws, "bulk", "63", "out.log")
	mustWrite(t, out, "")
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.Cordon(t), "run", "-v", "--", "sh", "-c", "echo FROM-THE-COMMAND")
	cmd.Dir, cmd.Env, cmd.Stdout = w.ws, w.env, f
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	if heldCalls(errb.String()) < 0 {
		t.Fatalf("the run had no barrier:\n%s", errb.String())
	}
	if b, _ := os.ReadFile(out); string(b) != "FROM-THE-COMMAND\n" {
		t.Fatalf("out.log = %q", b)
	}
	got, unread := diffOps(t, w)
	if got["bulk/63/out.log"] != "modified" {
		t.Errorf("bulk/63/out.log went from empty to the command's output during the run, and the diff has %q for it (unread=%v, diff %v):\n%s",
			got["bulk/63/out.log"], unread, got, grepLines(errb.String(), "diff"))
	}
}

// serveDescriptor listens on sock and hands each client the file at path opened with
// flag (SCM_RIGHTS): a host process (an editor's helper, a build daemon) the command
// can reach through a socket in the workspace. The file is opened before it returns,
// and closed once the listener has stopped, at the test's end.
func serveDescriptor(t *testing.T, sock, path string, flag int) {
	t.Helper()
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd := int(f.Fd())
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		l.Close()
		<-done
		f.Close()
	})
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(done)
		for {
			c, err := l.AcceptUnix()
			if err != nil {
				return
			}
			if _, _, err := c.WriteMsgUnix([]byte("x"), linux.UnixRights(fd), nil); err != nil {
				t.Logf("sending the descriptor: %v", err)
			}
			c.Close()
		}
	}()
}

// takeDescriptor is a python3 program that takes a descriptor from the socket h.sock,
// then writes through it: at its end (APPEND) or, with MMAP, through a shared mapping.
const takeDescriptor = `
import mmap, os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect("h.sock")
msg, anc, flags, addr = s.recvmsg(1, socket.CMSG_SPACE(4))
fd = int.from_bytes(anc[0][2][:4], "little")
if sys.argv[1] == "APPEND":
    os.write(fd, b"FROM-THE-COMMAND\n")
else:
    m = mmap.mmap(fd, 0)
    m[0:4] = b"EVIL"
    m.flush()
    m.close()
print("wrote", flush=True)
`

// TestRedBarrierPassedDescriptor: the command takes a descriptor for a file of the
// workspace, open for writing, from a host process over a socket in the workspace
// (connect, recvmsg: not held), and writes through it (write: not held, "only a held
// open can give" one) while the baseline is read. The diff misses the write.
func TestRedBarrierPassedDescriptor(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sharedBulk(t, w)
	victim := filepath.Join(w.ws, "bulk", "63", "31999")
	serveDescriptor(t, filepath.Join(w.ws, "h.sock"), victim, os.O_WRONLY|os.O_APPEND)
	r := w.cordon("", "run", "-v", "--", "python3", "-c", takeDescriptor, "APPEND")
	if r.code != 0 || !strings.Contains(r.stdout, "wrote") {
		t.Fatalf("run: %v", r)
	}
	if heldCalls(r.stderr) < 0 {
		t.Fatalf("the run had no barrier:\n%s", r.stderr)
	}
	if b, _ := os.ReadFile(victim); !strings.Contains(string(b), "FROM-THE-COMMAND") {
		t.Fatalf("the command did not write: %q", b)
	}
	got, unread := diffOps(t, w)
	if got["bulk/63/31999"] != "modified" {
		t.Errorf("the command appended to bulk/63/31999, and the diff has %q for it (unread=%v, diff %v):\n%s",
			got["bulk/63/31999"], unread, got, grepLines(r.stderr, "diff"))
	}
}

// TestRedBarrierUnreadMmap: the same descriptor, open for reading and writing, and a
// shared mapping written: no FAN_MODIFY, and the open was made before the run, so no
// FAN_OPEN either. The change set is empty, the baseline is ended unread, and fs.diff
// says, unread, that nothing changed. The hold of recvmsg reads the baseline before
// the write, and the change set still misses it: a command that received on a socket
// now gets the diff's walk. The diff reads again a file whose times are within its
// racy window of the baseline (100 ms) whatever the change set says, which saw the
// write by chance when the victim had been made again just before (it went unseen
// in CI's ci21): the victim's change time is let age past that window first.
func TestRedBarrierUnreadMmap(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sharedBulk(t, w)
	victim := filepath.Join(w.ws, "bulk", "63", "31999")
	// Whatever last changed the victim did so before this test began: past this, its
	// times are older than the racy window when the baseline starts.
	time.Sleep(200 * time.Millisecond)
	serveDescriptor(t, filepath.Join(w.ws, "h.sock"), victim, os.O_RDWR)
	r := w.cordon("", "run", "-v", "--", "python3", "-c", takeDescriptor, "MMAP")
	if r.code != 0 || !strings.Contains(r.stdout, "wrote") {
		t.Fatalf("run: %v", r)
	}
	if heldCalls(r.stderr) < 0 {
		t.Fatalf("the run had no barrier:\n%s", r.stderr)
	}
	if b, _ := os.ReadFile(victim); !strings.HasPrefix(string(b), "EVIL") {
		t.Fatalf("the command did not write: %q", b)
	}
	got, unread := diffOps(t, w)
	if got["bulk/63/31999"] != "modified" {
		t.Errorf("the command rewrote bulk/63/31999 through a shared mapping, and the diff has %q for it (unread=%v, diff %v):\n%s",
			got["bulk/63/31999"], unread, got, grepLines(r.stderr, "diff"))
	}
}

// leaseBaseline is a python3 program that takes a write lease on the last file of
// each directory of bulk (its owner may, on a descriptor open for reading: not held),
// ignoring the lease break's signal: the baseline's open of such a file, without
// blocking, fails (EWOULDBLOCK), and the baseline records it unreadable. A held mkdir
// returns once the baseline is read; the leases are dropped, and one file whose lease
// the baseline broke gets an injected line (printed: "target PATH").
const leaseBaseline = `
import fcntl, os, signal
signal.signal(signal.SIGIO, signal.SIG_IGN)
fds = {}
for i in range(63, -1, -1):
    p = "bulk/%d/%d" % (i, i * 500 + 499)
    fd = os.open(p, os.O_RDONLY)
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    fds[p] = fd
os.mkdir("sync")  # held until the baseline is read
broken = [p for p, fd in fds.items() if fcntl.fcntl(fd, fcntl.F_GETLEASE) != fcntl.F_WRLCK]
for fd in fds.values():
    fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
    os.close(fd)
os.rmdir("sync")
if broken:
    with open(broken[0], "a") as f:
        f.write("INJECTED LINE\n")
    print("target", broken[0], "of", len(broken), flush=True)
else:
    print("target none", flush=True)
`

// TestRedBarrierLeaseHidesPatch: a command that runs while the baseline is read can
// lease a file so that the baseline cannot read it; its change then shows as "Files
// differ (unreadable)" with no patch: the reviewer sees that the file changed, not
// the line the command injected. Had the command waited for the baseline (no
// barrier), the lease could not have been taken in time and the patch would show it.
// The barrier now holds F_SETLEASE as it holds a write: the lease comes too late.
func TestRedBarrierLeaseHidesPatch(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sharedBulk(t, w)
	r := w.cordon("", "run", "-v", "--", "python3", "-c", leaseBaseline)
	if r.code != 0 || !strings.Contains(r.stdout, "target") {
		t.Fatalf("run: %v", r)
	}
	if held := heldCalls(r.stderr); held <= 0 {
		t.Fatalf("the barrier held %d calls: the baseline was read before the lease, so this run tests nothing of it", held)
	}
	// The barrier holds F_SETLEASE too: no lease is taken before the baseline is
	// read, so it breaks none ("target none"), and the diff must say nothing changed.
	m := regexp.MustCompile(`target (\S+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("run: %v", r)
	}
	target := m[1]
	t.Logf("%s", strings.TrimSpace(r.stdout))
	_, diff := runEvents(t, w)
	if diff == nil {
		t.Fatal("no fs.diff")
	}
	if target != "none" && !strings.Contains(diff.Patch, "+INJECTED LINE") {
		t.Errorf("the command appended a line to %s, and the patch does not show it:\n%.600s", target, diff.Patch)
	}
	for _, c := range diff.Changes {
		if c.Path != target {
			t.Errorf("%s: %q in the diff, which nothing changed", c.Path, c.Op)
		}
	}
}

// seekListener is a python3 program that looks for a seccomp listener in every
// descriptor it can see in the sandbox, and tries to reach process 1 (which held the
// barrier's listener before handing it over): ptrace, and a write into its memory.
const seekListener = `
import ctypes, glob, os
libc = ctypes.CDLL(None, use_errno=True)
for p in glob.glob("/proc/*/fd/*"):
    try:
        if "seccomp" in os.readlink(p):
            print("LISTENER", p, flush=True)
    except OSError:
        pass
if libc.ptrace(16, 1, 0, 0) == 0:
    print("PTRACE-ATTACHED 1", flush=True)
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
loc, rem = iovec(ctypes.addressof(buf), 8), iovec(0x400000, 8)
if libc.process_vm_writev(1, ctypes.byref(loc), 1, ctypes.byref(rem), 1, 0) >= 0 or ctypes.get_errno() != 1:
    print("PROCESS-VM-WRITEV errno", ctypes.get_errno(), flush=True)
print("searched", flush=True)
`

// TestRedBarrierNoListenerInSandbox: nothing in the sandbox holds the barrier's
// listener, and process 1 cannot be traced or written to by the command.
func TestRedBarrierNoListenerInSandbox(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	r := w.cordon("", "run", "-v", "--", "python3", "-c", seekListener)
	if r.code != 0 || !strings.Contains(r.stdout, "searched") {
		t.Fatalf("run: %v", r)
	}
	if heldCalls(r.stderr) < 0 {
		t.Fatalf("the run had no barrier:\n%s", r.stderr)
	}
	for _, bad := range []string{"LISTENER", "PTRACE-ATTACHED", "PROCESS-VM-WRITEV"} {
		if strings.Contains(r.stdout, bad) {
			t.Errorf("%s:\n%s", bad, r.stdout)
		}
	}
}
