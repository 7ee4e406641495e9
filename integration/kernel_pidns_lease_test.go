package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestLeaseOfCordonInEndedPIDNamespaceTakenBack (bwrap): a cordon run inside a pid
// namespace of its own (as in a container sharing /run/cordon) records its owner as
// pid 1 of that namespace. While it runs, the host's `cordon gc` leaves its lease; once
// it is killed with SIGKILL, and its namespace with it, gc takes the lease back
// instead of keeping it for ever (which drained the range).
func TestLeaseOfCordonInEndedPIDNamespaceTakenBack(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
		testutil.Cordon(t), "run", "--", "sh", "-c", "id -u > uid.tmp && mv uid.tmp uid; sleep 600")
	cmd.Dir, cmd.Env = w.ws, w.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })

	uid := 0
	for deadline := time.Now().Add(time.Minute); uid == 0; time.Sleep(20 * time.Millisecond) {
		if data, err := os.ReadFile(filepath.Join(w.ws, "uid")); err == nil {
			uid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			break
		}
		select {
		case <-done:
			t.Fatalf("cordon in its own pid namespace ended before its command ran: %s", &out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not run within a minute: %s", &out)
		}
	}
	rec, ok := leaseOf(uid)
	host, _ := os.Readlink("/proc/self/ns/pid")
	if !ok || rec.Owner.PID != 1 || rec.Owner.PIDNS == "" || "pid:["+rec.Owner.PIDNS+"]" == host {
		t.Fatalf("uid %d: lease %+v (%v); want one owned by pid 1 of another pid namespace", uid, rec, ok)
	}
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("cordon gc: %v", r)
	}
	if _, ok := leaseOf(uid); !ok {
		t.Fatalf("gc took back uid %d while its owner runs in its pid namespace", uid)
	}

	_ = cmd.Process.Kill() // unshare; --kill-child takes cordon, pid 1 of the namespace, and so every process in it
	<-done
	deadline := time.Now().Add(time.Minute)
	for len(processesOf(uid)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p := processesOf(uid); len(p) > 0 {
		t.Fatalf("the sandbox still runs as uid %d a minute after its pid namespace was killed:%s", uid, describeProcesses(p))
	}
	if r := w.cordon("", "gc"); r.code != 0 {
		t.Fatalf("cordon gc: %v", r)
	}
	if rec, ok := leaseOf(uid); ok {
		t.Errorf("uid %d is still leased after its cordon's pid namespace ended and gc ran: %+v", uid, rec)
	}
	assertNothingOwnedBy(t, uid)
}
