package integration

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// bigWorkspace fills w's workspace with n small files in directories of 500, so that
// its baseline is still being read when a command that writes at once starts.
func bigWorkspace(t *testing.T, w *world, n int) {
	t.Helper()
	for i := range n {
		dir := filepath.Join(w.ws, "bulk", strconv.Itoa(i/500))
		if i%500 == 0 {
			mustMkdir(t, dir)
		}
		mustWrite(t, filepath.Join(dir, strconv.Itoa(i)), "bulk "+strconv.Itoa(i)+"\n")
	}
}

// heldCalls is how many calls the run's barrier held, from its debug log (-v); -1
// when the run had no barrier.
func heldCalls(stderr string) int {
	m := regexp.MustCompile(`the barrier's held calls.* held=(\d+)`).FindStringSubmatch(stderr)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A direct run as root starts its command before the workspace's baseline is read,
// behind a barrier that holds every call that may change a file until it is (issue
// 39). A command that changes the workspace in every way at once, in a workspace big
// enough that the baseline is still being read, gets exactly the diff it would have
// got had it waited for the baseline.
func TestRedBarrierWritesAtOnce(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sharedBulk(t, w)
	// The walk reads the 64 directories of bulk a few at a time: the changes are
	// spread over them, so that, were they not held, most would be made before the
	// baseline reads them.
	r := w.cordon("", "run", "-v", "--", "sh", "-c", `i=0
while [ $i -lt 64 ]; do echo NEW >> bulk/$i/$((i*500+250)); i=$((i+1)); done
echo new > bulk/1/new.txt
mv bulk/2/1499 bulk/2/moved
rm bulk/3/1999
chmod 600 bulk/4/2499
truncate -s 1 bulk/5/2999
mkdir bulk/6/newdir
ln -s 3499 bulk/7/link
python3 -c 'import os; os.setxattr("bulk/8/4499", "user.barrier", b"1")'`)
	if r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	held := heldCalls(r.stderr)
	t.Logf("held %d calls", held)
	if held < 0 {
		t.Fatalf("the run had no barrier:\n%s", r.stderr)
	}
	if held == 0 {
		t.Fatal("the barrier held nothing: the baseline was complete before the command wrote, so this run tests nothing of it")
	}
	_, diff := runEvents(t, w)
	if diff == nil {
		t.Fatal("no fs.diff")
	}
	if diff.Scan.Unread {
		t.Error("the diff is marked unread, and the command changed the workspace")
	}
	got := map[string]string{}
	for _, c := range diff.Changes {
		got[c.Path] = c.Op
		if c.Op == "renamed" {
			got[c.Path] = "renamed from " + c.OldPath
		}
		if len(c.Xattrs) > 0 {
			got[c.Path] += " xattrs"
		}
		if c.OldMode != c.NewMode && c.OldMode != "" && c.NewMode != "" {
			got[c.Path] += " mode " + c.NewMode
		}
	}
	want := map[string]string{
		"bulk/1/new.txt": "added",
		"bulk/2/moved":   "renamed from bulk/2/1499",
		"bulk/3/1999":    "deleted",
		"bulk/4/2499":    "modified mode 100600",
		"bulk/5/2999":    "modified",
		"bulk/6/newdir":  "added",
		"bulk/7/link":    "added",
		"bulk/8/4499":    "modified xattrs",
	}
	for i := range 64 {
		want[fmt.Sprintf("bulk/%d/%d", i, i*500+250)] = "modified"
	}
	for p, op := range want {
		if got[p] != op {
			t.Errorf("%s: %q in the diff; want %q", p, got[p], op)
		}
	}
	for p, op := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %q in the diff, which nothing changed", p, op)
		}
	}
}

// A command that writes nothing gets an empty diff, without waiting for the
// baseline, and the diff says its counts are unknown rather than zero.
func TestBarrierNothingChanged(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	// Big enough that the baseline is most likely still being read when the command
	// has ended. It opens nothing in the workspace: a file it opened once the
	// baseline is read would be watched (as a possible mmap write), and the change set
	// not empty. No redirection either: sh's open of /dev/null for writing would be
	// held until the baseline is read. Its output goes to a pipe, which cordon's
	// copy does not hold (a regular file it would: TestRedBarrierStdoutIntoWorkspace).
	sharedBulk(t, w)
	r := w.cordon("", "run", "-v", "--", "echo", "said")
	if r.code != 0 || r.stdout != "said\n" {
		t.Fatalf("run: %v", r)
	}
	if heldCalls(r.stderr) < 0 {
		t.Fatalf("the run had no barrier:\n%s", r.stderr)
	}
	_, diff := runEvents(t, w)
	if diff == nil {
		t.Fatal("no fs.diff")
	}
	if len(diff.Changes) != 0 || diff.Files != 0 {
		t.Errorf("%d changes for a command that wrote nothing: %+v", len(diff.Changes), diff.Changes)
	}
	// On a busy machine the baseline may be read before the command ends, or other
	// processes change files on the workspace's file system (the watch marks all of
	// it: files changed with no name reported are checked against the baseline), and
	// the diff then reads the baseline (not unread): no fault, only slower.
	if !diff.Scan.Unread {
		t.Logf("the diff read the baseline (%+v):\n%s", diff.Scan, grepLines(r.stderr, "the diff waits for the baseline"))
	}
	if diff.Scan.Unread && (diff.Scan.Files != 0 || diff.Scan.Read != 0) {
		t.Errorf("an unread scan counts files: %+v", diff.Scan)
	}
}

// grepLines is the lines of s that hold word.
func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// ownListener is a python3 program that tries to load a notifying filter of its own
// on openat, with a listener answered by a child forked before it (the kernel gives a
// notification to the newest filter when two say the same), then appends to one file
// in each of the 64 directories of bulk: were the barrier's notifications its own to
// answer, its writes would go on before the baseline read them. The kernel refuses a
// second listener in a filter chain (EBUSY); where it did not, answering would take
// ioctls the barrier holds.
const ownListener = `
import ctypes, os, platform, socket, struct
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": (257, 317), "aarch64": (56, 277)}[platform.machine()]
a, b = socket.socketpair(socket.AF_UNIX)
if os.fork() == 0:
    msg, anc, flags, addr = b.recvmsg(1, socket.CMSG_SPACE(4))
    fd = struct.unpack("i", anc[0][2][:4])[0]
    buf = ctypes.create_string_buffer(80)
    while True:
        ctypes.memset(buf, 0, 80)
        if libc.ioctl(fd, ctypes.c_ulong(0xc0502100), buf) != 0:
            os._exit(0)
        resp = ctypes.create_string_buffer(struct.pack("QqiI", struct.unpack_from("Q", buf, 0)[0], 0, 0, 1), 24)
        libc.ioctl(fd, ctypes.c_ulong(0xc0182101), resp)
insns = [(0x20, 0, 0, 0), (0x15, 0, 1, nr[0]), (0x06, 0, 0, 0x7fc00000), (0x06, 0, 0, 0x7fff0000)]
filt = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in insns))
prog = struct.pack("HxxxxxxQ", len(insns), ctypes.addressof(filt))
progbuf = ctypes.create_string_buffer(prog, len(prog))
fd = libc.syscall(nr[1], 1, 8, progbuf)
if fd < 0:
    print("own listener refused: errno", ctypes.get_errno(), flush=True)
else:
    print("own listener loaded", flush=True)
    a.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))])
for i in range(64):
    with open("bulk/%d/%d" % (i, i * 500 + 250), "a") as f:
        f.write("NEW\n")
os._exit(0)
`

// TestRedBarrierOwnListener: a command's own seccomp listener takes no call out of
// the barrier's hold.
func TestRedBarrierOwnListener(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sharedBulk(t, w)
	r := w.cordon("", "run", "-v", "--", "python3", "-c", ownListener)
	if r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	t.Logf("%s", strings.TrimSpace(r.stdout))
	if held := heldCalls(r.stderr); held <= 0 {
		t.Fatalf("the barrier held %d calls: the baseline was read before the command wrote, so this run tests nothing of it", held)
	}
	_, diff := runEvents(t, w)
	if diff == nil {
		t.Fatal("no fs.diff")
	}
	got := map[string]string{}
	for _, c := range diff.Changes {
		got[c.Path] = c.Op
	}
	for i := range 64 {
		if p := fmt.Sprintf("bulk/%d/%d", i, i*500+250); got[p] != "modified" {
			t.Errorf("%s: %q in the diff; want modified", p, got[p])
		}
	}
	if len(got) != 64 {
		t.Errorf("%d changes in the diff; want 64", len(got))
	}
}
