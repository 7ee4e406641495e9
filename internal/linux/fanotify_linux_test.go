package linux

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordonhq/cordon/internal/testutil"
)

// WatchCreates reports a directory made, and one moved into place, with its directory's
// path, and only the names the filter keeps.
func TestWatchCreates(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	w, err := WatchCreates(dir, func(n string, _ bool) bool { return n == ".git" })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.MkdirAll(filepath.Join(dir, "a", "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "a", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "prep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "prep"), filepath.Join(dir, "b", ".git")); err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	for _, d := range want {
		select {
		case c := <-w.Events():
			if c.Dir != d || c.Name != ".git" {
				t.Fatalf("got %+v, want %s/.git", c, d)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event for %s/.git", d)
		}
	}
}

// TestWatchCreatesUnmark: Unmark removes the group's mark (the kernel lists none for
// its descriptor) and what the watch had queued before it is still delivered; Close
// after it still ends the watch.
func TestWatchCreatesUnmark(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	w, err := WatchCreates(dir, func(n string, _ bool) bool { return n == ".git" })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	marks := func() int {
		b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(w.fd))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "fanotify sdev:")
	}
	if n := marks(); n != 1 {
		t.Fatalf("%d file-system marks before Unmark, want 1", n)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a", ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Unmark(); err != nil {
		t.Fatal(err)
	}
	if n := marks(); n != 0 {
		t.Fatalf("%d file-system marks after Unmark, want none", n)
	}
	select {
	case c := <-w.Events():
		if c.Dir != filepath.Join(dir, "a") || c.Name != ".git" {
			t.Fatalf("got %+v, want a/.git", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("what was made before Unmark was not delivered")
	}
	w.Close()
	for c := range w.Events() {
		t.Fatalf("an event after Unmark: %+v", c)
	}
}

// TestCloseInKernelReleases: a descriptor closed through closeInKernel is released
// (by the kernel's collector of in-flight descriptors) and the socket pair that carried
// it goes with it: the read end of a pipe whose write end went that way sees its end.
func TestCloseInKernelReleases(t *testing.T) {
	for range 3 {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		closeInKernel(p[1])
		if _, err := unix.FcntlInt(uintptr(p[1]), unix.F_GETFD, 0); err != unix.EBADF {
			t.Errorf("the descriptor is still open in this process: %v", err)
		}
		pfd := []unix.PollFd{{Fd: int32(p[0]), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, 30_000)
		if err != nil || n != 1 || pfd[0].Revents&unix.POLLHUP == 0 {
			t.Fatalf("the pipe's write end was not released: poll %d %v %#x", n, err, pfd[0].Revents)
		}
		unix.Close(p[0])
	}
}
