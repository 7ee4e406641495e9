package linux

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordonhq/cordon/internal/seccomp"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestSeccompListenerHoldsUntilContinued loads the barrier on a thread of its own and
// checks, against the real kernel, that a read-only open passes unheld, that a mkdir
// and a write open wait (nothing is made) until the listener continues them, and that
// the listener reports the end once the thread is gone.
func TestSeccompListenerHoldsUntilContinued(t *testing.T) {
	requireSeccomp(t)
	arch, _ := seccomp.Native()
	prog, err := seccomp.BarrierProgram(arch)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	made, written := filepath.Join(dir, "made"), filepath.Join(dir, "written")
	if err := os.WriteFile(filepath.Join(dir, "read"), []byte("r"), 0o644); err != nil {
		t.Fatal(err)
	}
	type step struct {
		what string
		err  error
	}
	listener := make(chan *os.File, 1)
	steps := make(chan step, 4)
	// On a thread of its own (never the main one, which cannot end), which dies
	// with its filter.
	go OnOwnThread(func() error {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			steps <- step{"nnp", err}
			listener <- nil
			return nil
		}
		f, err := LoadSeccompListenerThread(prog)
		listener <- f
		if err != nil {
			steps <- step{"load", err}
			return nil
		}
		_, err = os.ReadFile(filepath.Join(dir, "read"))
		steps <- step{"read", err}
		steps <- step{"mkdir", unix.Mkdir(made, 0o755)}
		steps <- step{"write", os.WriteFile(written, []byte("w"), 0o644)}
		return nil
	})
	f := <-listener
	if f == nil {
		s := <-steps
		t.Fatalf("%s: %v", s.what, s.err)
	}
	if !IsSeccompListener(f) {
		t.Error("the listener is not taken for a seccomp listener")
	}
	l, err := NewSeccompListener(f)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.SyncWakeUp(); err != nil {
		t.Logf("no sync wake-up (Linux 6.6): %v", err)
	}
	if s := <-steps; s.what != "read" || s.err != nil {
		t.Fatalf("the read-only open: %s %v; want it through, unheld", s.what, s.err)
	}
	for _, want := range []struct {
		name, path string
		nr         int32
	}{{"mkdir", made, unix.SYS_MKDIRAT}, {"write", written, unix.SYS_OPENAT}} {
		c, err := l.Receive()
		if err != nil {
			t.Fatalf("%s: receive: %v", want.name, err)
		}
		if c.Nr != want.nr {
			t.Errorf("%s: held call %d; want %d", want.name, c.Nr, want.nr)
		}
		if _, err := os.Lstat(want.path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: held, and %s exists already (%v)", want.name, want.path, err)
		}
		select {
		case s := <-steps:
			t.Fatalf("%s returned while held: %s %v", want.name, s.what, s.err)
		default:
		}
		if err := l.Continue(c.ID); err != nil {
			t.Fatal(err)
		}
		if s := <-steps; s.what != want.name || s.err != nil {
			t.Fatalf("continued %s: got %s %v", want.name, s.what, s.err)
		}
		if _, err := os.Lstat(want.path); err != nil {
			t.Errorf("%s continued, and %s is not there: %v", want.name, want.path, err)
		}
	}
	ended := make(chan error, 1)
	go func() {
		_, err := l.Receive()
		ended <- err
	}()
	select {
	case err := <-ended:
		if err != io.EOF {
			t.Errorf("receive once the filtered thread is gone: %v; want io.EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("receive still waits 10s after the filtered thread ended")
	}
}

// TestSeccompListenerClosedFails: once the listener is closed, a held call fails
// (ENOSYS) rather than go through.
func TestSeccompListenerClosedFails(t *testing.T) {
	requireSeccomp(t)
	arch, _ := seccomp.Native()
	prog, err := seccomp.BarrierProgram(arch)
	if err != nil {
		t.Fatal(err)
	}
	made := filepath.Join(t.TempDir(), "made")
	done := make(chan error, 1)
	go OnOwnThread(func() error {
		err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
		var f *os.File
		if err == nil {
			f, err = LoadSeccompListenerThread(prog)
		}
		if err == nil {
			f.Close()
			err = unix.Mkdir(made, 0o755)
		} else {
			err = errors.Join(errors.New("setup"), err)
		}
		done <- err
		return nil
	})
	if err := <-done; !errors.Is(err, unix.ENOSYS) {
		t.Errorf("mkdir with the listener closed: %v; want ENOSYS", err)
	}
	if _, err := os.Lstat(made); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mkdir went through: %v", err)
	}
}

func TestSeccompListenerSupported(t *testing.T) {
	requireSeccomp(t)
	why := SeccompListenerSupported()
	testutil.Require(t, why == "", "a kernel with seccomp listeners: "+why)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if IsSeccompListener(r) {
		t.Error("a pipe is taken for a seccomp listener")
	}
}

// TestSeccompListenerCloseEndsReceive: Close ends a Receive that waits.
func TestSeccompListenerCloseEndsReceive(t *testing.T) {
	requireSeccomp(t)
	arch, _ := seccomp.Native()
	prog, err := seccomp.BarrierProgram(arch)
	if err != nil {
		t.Fatal(err)
	}
	listener, release := make(chan *os.File, 1), make(chan struct{})
	go OnOwnThread(func() error {
		var f *os.File
		err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
		if err == nil {
			f, err = LoadSeccompListenerThread(prog)
		}
		listener <- f
		<-release // the filter's thread lives on: no end of its users ends the wait
		return err
	})
	defer close(release)
	f := <-listener
	if f == nil {
		t.Fatal("no listener")
	}
	l, err := NewSeccompListener(f)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := l.Receive()
		ended <- err
	}()
	l.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("receive after close: %v; want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("receive still waits 10s after close")
	}
}
