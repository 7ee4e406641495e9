package pid1

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDirArg(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
		ok   bool
	}{
		{"fds", []string{"/run/cordon/cordon", "internal", "init"}, "", false},
		{"separate", []string{"/run/cordon/cordon", "internal", "init", "--dir", "/run/cordon"}, "/run/cordon", true},
		{"joined", []string{"cordon", "internal", "init", "--dir=/x"}, "/x", true},
		{"flag without value", []string{"cordon", "internal", "init", "--dir"}, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := dirArg(c.args)
			if got != c.want || ok != c.ok {
				t.Errorf("dirArg(%q) = %q, %v; want %q, %v", c.args, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestFilesProtocol(t *testing.T) {
	saved := os.Environ()
	t.Cleanup(func() {
		os.Clearenv()
		for _, kv := range saved {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
	})
	dir := filepath.Join(t.TempDir(), "init")
	if err := PrepareDir(dir, []string{"A=1", "B=x=y"}, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatal(err)
	}
	if err := WriteSpec(dir, Spec{Argv: []string{"true"}, Dir: "/w"}, os.Geteuid(), os.Getegid()); err != nil {
		t.Fatal(err)
	}
	env, _ := os.ReadFile(filepath.Join(dir, DirEnv))
	if string(env) != "A=1\x00B=x=y\x00" {
		t.Errorf("env file: got %q", env)
	}
	if err := PrepareDir(filepath.Join(t.TempDir(), "bad"), []string{"A=\x00"}, os.Geteuid(), os.Getegid()); err == nil {
		t.Error("an environment entry with a NUL byte must be refused")
	}

	// Without the host's end open, pid1 cannot start: it must not run unwatched.
	if _, _, _, err := openDir(dir); err == nil || !strings.Contains(err.Error(), "is cordon still running") {
		t.Fatalf("openDir without a reader: got %v", err)
	}
	host, err := OpenStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	status, spec, watch, err := openDir(dir) // never dieWithHost here: it would exit the test
	if err != nil {
		t.Fatal(err)
	}
	spec.Close()
	syscall.Close(watch)
	if os.Getenv("A") != "1" || os.Getenv("B") != "x=y" || os.Getenv("PATH") != "" {
		t.Errorf("environment not replaced: A=%q B=%q PATH=%q", os.Getenv("A"), os.Getenv("B"), os.Getenv("PATH"))
	}
	if _, err := status.Write([]byte(`{"ok":false,"error":"boom"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	status.Close()
	st, ok := ReadStatus(host)
	if !ok || st.OK || st.Error != "boom" {
		t.Errorf("ReadStatus: got %+v, %v", st, ok)
	}
}

func TestWaitReaderGone(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "status")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	host, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	done := make(chan error, 1)
	go func() { done <- waitReaderGone(fd) }()
	select {
	case err := <-done:
		t.Fatalf("returned while the host still holds the pipe: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	host.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the host's end closed but the watcher did not notice")
	}
}
