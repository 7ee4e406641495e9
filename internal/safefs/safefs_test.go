package safefs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// tree makes, in a temporary directory, a "ws" directory holding the layout the
// tests attack and an "outside" secret; it returns the temporary directory.
func tree(t *testing.T) string {
	t.Helper()
	top := t.TempDir()
	ws := filepath.Join(top, "ws")
	for _, d := range []string{"ws/sub/deep", "outside"} {
		if err := os.MkdirAll(filepath.Join(top, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, data string) {
		if err := os.WriteFile(filepath.Join(top, p), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("outside/secret", "SECRET")
	write("ws/file", "inside")
	write("ws/sub/deep/file", "deep")
	write("ws/big", string(make([]byte, 100)))
	must(t, os.Symlink(filepath.Join(top, "outside/secret"), filepath.Join(ws, "leaf-out")))
	must(t, os.Symlink("file", filepath.Join(ws, "leaf-in")))
	must(t, os.Symlink(filepath.Join(top, "outside"), filepath.Join(ws, "mid-out")))
	must(t, linux.Mkfifo(filepath.Join(ws, "fifo"), 0o600))
	return top
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestOpen(t *testing.T) {
	top := tree(t)
	d, err := OpenDir(top, "ws")
	must(t, err)
	defer d.Close()
	for _, c := range []struct {
		name, rel string
		max       int64
		want      string // content, "" when refused
		is        error  // the refusal, when it has a sentinel
	}{
		{"regular file", "file", 100, "inside", nil},
		{"regular file below", "sub/deep/file", 100, "deep", nil},
		{"no limit", "big", NoLimit, string(make([]byte, 100)), nil},
		{"at the limit", "big", 100, string(make([]byte, 100)), nil},
		{"past the limit", "big", 99, "", ErrTooLarge},
		{"link at the leaf, out", "leaf-out", 100, "", nil},
		{"link at the leaf, in", "leaf-in", 100, "", nil},
		{"link in a middle component, out", "mid-out/secret", 100, "", nil},
		{"dot-dot out", "../outside/secret", 100, "", nil},
		{"absolute path", filepath.Join(top, "outside/secret"), 100, "", nil},
		{"fifo", "fifo", 100, "", ErrNotRegular},
		{"directory", "sub", 100, "", ErrNotRegular},
		{"missing", "nope", 100, "", fs.ErrNotExist},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan struct{})
			var f *os.File
			var err error
			go func() { // a FIFO opened blocking would hang here
				defer close(done)
				f, err = d.Open(c.rel, c.max)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("Open(%q) blocked", c.rel)
			}
			if c.want == "" {
				if err == nil {
					f.Close()
					t.Fatalf("Open(%q) succeeded; want a refusal", c.rel)
				}
				if c.is != nil && !errors.Is(err, c.is) {
					t.Fatalf("Open(%q) = %v; want %v", c.rel, err, c.is)
				}
				return
			}
			must(t, err)
			f.Close()
			got, err := d.ReadFile(c.rel, max(c.max, 100))
			must(t, err)
			if string(got) != c.want {
				t.Fatalf("ReadFile(%q) = %q; want %q", c.rel, got, c.want)
			}
		})
	}
}

// TestMiddleLinkInside: on Linux a link on the way is refused even when it stays
// inside the directory (os.Root would follow it).
func TestMiddleLinkInside(t *testing.T) {
	testutil.Require(t, runtime.GOOS == "linux", "only Linux refuses links that stay inside (openat2)")
	top := tree(t)
	must(t, os.Symlink("sub", filepath.Join(top, "ws", "mid-in")))
	d, err := OpenDir(top, "ws")
	must(t, err)
	defer d.Close()
	if f, err := d.Open("mid-in/deep/file", 100); err == nil {
		f.Close()
		t.Fatal("opened a file through a link on the way")
	}
	if _, err := d.Sub("mid-in"); err == nil {
		t.Fatal("Sub followed a link")
	}
}

func TestReadFileLimit(t *testing.T) {
	top := tree(t)
	d, err := OpenDir(top, "ws")
	must(t, err)
	defer d.Close()
	if _, err := d.ReadFile("big", 10); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("ReadFile past the limit = %v; want ErrTooLarge", err)
	}
	if _, err := d.ReadFile("file", NoLimit); err == nil {
		t.Fatal("ReadFile without a limit succeeded")
	}
}

func TestOpenDir(t *testing.T) {
	top := tree(t)
	for _, rel := range []string{"mid-out", "leaf-in", "fifo", "file"} {
		if d, err := OpenDir(filepath.Join(top, "ws"), rel); err == nil {
			d.Close()
			t.Errorf("OpenDir(ws, %q) succeeded; want a refusal", rel)
		}
	}
	ws, err := OpenDir(top, "ws")
	must(t, err)
	defer ws.Close()
	for _, rel := range []string{"mid-out", "leaf-in", "file"} {
		if f, err := ws.OpenDirFile(rel); err == nil {
			f.Close()
			t.Errorf("OpenDirFile(%q) succeeded; want a refusal", rel)
		}
	}
	f, err := ws.OpenDirFile("sub")
	must(t, err)
	if names, err := f.Readdirnames(-1); err != nil || len(names) != 1 {
		t.Fatalf("OpenDirFile(sub) lists %q, %v", names, err)
	}
	f.Close()
	d, err := OpenDir(filepath.Join(top, "ws"), "sub")
	must(t, err)
	defer d.Close()
	names, err := d.Names(".", 0)
	must(t, err)
	if len(names) != 1 || names[0] != "deep" {
		t.Fatalf("Names = %q; want [deep]", names)
	}
	fi, err := d.Lstat("deep/file")
	must(t, err)
	if !fi.Mode().IsRegular() || fi.Size() != 4 {
		t.Fatalf("Lstat(deep/file) = %v %d", fi.Mode(), fi.Size())
	}
	empty, err := d.Sub("deep")
	must(t, err)
	defer empty.Close()
	must(t, os.Remove(filepath.Join(top, "ws/sub/deep/file")))
	if names, err := empty.Names(".", 10); err != nil || len(names) != 0 {
		t.Fatalf("Names of an empty directory = %q, %v", names, err)
	}
}

// TestSwapRace: while another goroutine swaps the leaf between a regular file and a
// link out, and a middle directory between a directory and a link out, every open
// that succeeds reads the inside content, never the secret.
func TestSwapRace(t *testing.T) {
	top := tree(t)
	ws := filepath.Join(top, "ws")
	d, err := OpenDir(top, "ws")
	must(t, err)
	defer d.Close()
	// Prepared once: the swaps are renames, each atomic.
	must(t, os.WriteFile(filepath.Join(ws, "real"), []byte("inside"), 0o600))
	must(t, os.Symlink(filepath.Join(top, "outside/secret"), filepath.Join(ws, "evil")))
	must(t, os.MkdirAll(filepath.Join(ws, "realdir"), 0o700))
	must(t, os.WriteFile(filepath.Join(ws, "realdir/secret"), []byte("inside"), 0o600))
	must(t, os.Symlink(filepath.Join(top, "outside"), filepath.Join(ws, "evildir")))
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			// Swap the leaf t and the middle m between the real and the evil.
			_ = os.Link(filepath.Join(ws, "real"), filepath.Join(ws, "tmp-real"))
			_ = os.Rename(filepath.Join(ws, "tmp-real"), filepath.Join(ws, "t"))
			_ = os.Symlink(filepath.Join(top, "outside/secret"), filepath.Join(ws, "tmp-evil"))
			_ = os.Rename(filepath.Join(ws, "tmp-evil"), filepath.Join(ws, "t"))
			_ = os.Rename(filepath.Join(ws, "realdir"), filepath.Join(ws, "m"))
			_ = os.Rename(filepath.Join(ws, "m"), filepath.Join(ws, "realdir"))
			_ = os.Symlink(filepath.Join(top, "outside"), filepath.Join(ws, "tmp-evildir"))
			_ = os.Rename(filepath.Join(ws, "tmp-evildir"), filepath.Join(ws, "m"))
			_ = os.Remove(filepath.Join(ws, "m"))
		}
	}()
	var opened int
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		for _, rel := range []string{"t", "m/secret"} {
			data, err := d.ReadFile(rel, 100)
			if err != nil {
				continue
			}
			opened++
			if bytes.Contains(data, []byte("SECRET")) {
				stop.Store(true)
				wg.Wait()
				t.Fatalf("ReadFile(%q) read the secret through a swapped-in link", rel)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d opens succeeded during the race", opened)
}
