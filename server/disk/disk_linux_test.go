package disk

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

// newDisk is a disk of size bytes under a fresh directory, unmounted when the test ends.
func newDisk(t *testing.T, size int64) Disk {
	t.Helper()
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := New(filepath.Join(dir, "tenant"), size)
	t.Cleanup(func() {
		for isMounted(d.Root) {
			if err := Unmount(d.Root); err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
		}
	})
	return d
}

func isMounted(path string) bool {
	root, _, err := linux.MountRoot(path)
	return err == nil && root
}

// loopsOf counts the loop devices whose backing file is d's image (by its path, as
// the kernel shows it).
func loopsOf(t *testing.T, d Disk) int {
	t.Helper()
	names, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	n := 0
	for _, name := range names {
		if data, err := os.ReadFile(name); err == nil && strings.TrimSpace(string(data)) == d.Image {
			n++
		}
	}
	return n
}

// allocated is how many bytes of the host's disk path's blocks take.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

func mustMount(t *testing.T, d Disk) {
	t.Helper()
	if err := Mount(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// TestMountMakesKeepsAndRemounts: the first Mount makes a sparse image of the size and
// mounts it over the root; again, it keeps it; after an unmount, it mounts the same
// file system again, with what was written on it.
func TestMountMakesKeepsAndRemounts(t *testing.T) {
	d := newDisk(t, 64<<20)
	mustMount(t, d)
	if !isMounted(d.Root) {
		t.Fatal("the root is not a mount point after Mount")
	}
	size, _, err := Space(d.Root)
	if err != nil || size > d.Size || size < d.Size*8/10 {
		t.Fatalf("file system size %d (%v); want about %d", size, err, d.Size)
	}
	if fi, err := os.Stat(d.Image); err != nil || fi.Size() != d.Size || allocated(t, d.Image) >= d.Size/2 {
		t.Fatalf("image: %v, %d bytes allocated (%v); want %d, sparse", fi, allocated(t, d.Image), err, d.Size)
	}
	if fi, err := os.Stat(d.Root); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("root mode %v (%v); want 0700", fi.Mode(), err)
	}
	if err := os.WriteFile(filepath.Join(d.Root, "kept"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMount(t, d) // again: kept as it is
	if n := loopsOf(t, d); n != 1 {
		t.Fatalf("%d loop devices hold the image after a second Mount; want 1", n)
	}
	if err := Unmount(d.Root); err != nil {
		t.Fatal(err)
	}
	if isMounted(d.Root) {
		t.Fatal("still mounted after Unmount")
	}
	mustMount(t, d)
	if _, err := os.Stat(filepath.Join(d.Root, "kept")); err != nil {
		t.Fatalf("a file written before the remount: %v", err)
	}
}

// TestMountReusesAnAttachedImage: an image still attached (a killed daemon's sessions
// hold its file system in their mount namespaces; here, a file open on it) is mounted
// from that same device, never attached a second time.
func TestMountReusesAnAttachedImage(t *testing.T) {
	d := newDisk(t, 64<<20)
	mustMount(t, d)
	held, err := os.Create(filepath.Join(d.Root, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := Unmount(d.Root); err != nil {
		t.Fatal(err)
	}
	if n := loopsOf(t, d); n != 1 {
		t.Fatalf("%d loop devices hold the image after an unmount with a file open; want it still attached", n)
	}
	mustMount(t, d)
	if n := loopsOf(t, d); n != 1 {
		t.Fatalf("%d loop devices hold the image; want the one still attached", n)
	}
	if _, err := held.WriteString("seen"); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(d.Root, "held")); err != nil || string(data) != "seen" {
		t.Fatalf("the root and the open file are not the same file system: %q %v", data, err)
	}
}

// TestMountRefuses: a root with data and no image, an image that is a symbolic link, a
// hard link or another user's to write, and a quota below the image are refused.
func TestMountRefuses(t *testing.T) {
	t.Run("a root with data", func(t *testing.T) {
		d := newDisk(t, 64<<20)
		if err := os.MkdirAll(filepath.Join(d.Root, "workspaces"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := Mount(context.Background(), d); err == nil || !strings.Contains(err.Error(), "holds data") {
			t.Fatalf("Mount over a root with data: %v; want refused", err)
		}
		if _, err := os.Stat(d.Image); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("an image was left: %v", err)
		}
	})
	t.Run("an image that is a symbolic link", func(t *testing.T) {
		d := newDisk(t, 64<<20)
		target := filepath.Join(filepath.Dir(d.Root), "elsewhere")
		if err := os.WriteFile(target, make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, d.Image); err != nil {
			t.Fatal(err)
		}
		if err := Mount(context.Background(), d); !errors.Is(err, syscall.ELOOP) {
			t.Fatalf("Mount with a symlinked image: %v; want ELOOP", err)
		}
	})
	t.Run("an image with two links", func(t *testing.T) {
		d := newDisk(t, 64<<20)
		mustMount(t, d)
		if err := Unmount(d.Root); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(d.Image, d.Image+".2"); err != nil {
			t.Fatal(err)
		}
		if err := Mount(context.Background(), d); !errors.Is(err, paths.ErrUnsafe) {
			t.Fatalf("Mount of an image with two links: %v; want refused", err)
		}
	})
	t.Run("an image others may write", func(t *testing.T) {
		d := newDisk(t, 64<<20)
		mustMount(t, d)
		if err := Unmount(d.Root); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d.Image, 0o666); err != nil {
			t.Fatal(err)
		}
		if err := Mount(context.Background(), d); !errors.Is(err, paths.ErrUnsafe) {
			t.Fatalf("Mount of a world-writable image: %v; want refused", err)
		}
	})
	t.Run("a quota below the image", func(t *testing.T) {
		d := newDisk(t, 64<<20)
		mustMount(t, d)
		d.Size = 48 << 20
		if err := Mount(context.Background(), d); err == nil || !strings.Contains(err.Error(), "never shrunk") {
			t.Fatalf("Mount with a smaller quota: %v; want refused", err)
		}
	})
	t.Run("below the least", func(t *testing.T) {
		d := newDisk(t, MinSize-1)
		if err := Mount(context.Background(), d); err == nil {
			t.Fatal("Mount of a disk below MinSize: no error")
		}
	})
}

// TestMountGrows: a larger quota grows the file system when it is next mounted; while
// it is mounted, Mount says the growth waits (growing a mounted ext4 needs
// CAP_SYS_RESOURCE, which root may lack) and leaves it as it is.
func TestMountGrows(t *testing.T) {
	d := newDisk(t, 64<<20)
	mustMount(t, d)
	d.Size = 128 << 20
	if err := Mount(context.Background(), d); !errors.Is(err, ErrGrowLater) {
		t.Fatalf("Mount of a mounted disk with a larger quota: %v; want ErrGrowLater", err)
	}
	if !isMounted(d.Root) {
		t.Fatal("not mounted any more")
	}
	if err := Unmount(d.Root); err != nil {
		t.Fatal(err)
	}
	mustMount(t, d)
	size, _, err := Space(d.Root)
	if err != nil || size < 100<<20 {
		t.Fatalf("after growing to %d: size %d (%v)", d.Size, size, err)
	}
}

// TestFullDiskLeavesRootItsReserve: an unprivileged uid (a sandbox's) that writes
// until the disk is full stops at ENOSPC, and root (cordon, appending a log) can still
// write after it.
func TestFullDiskLeavesRootItsReserve(t *testing.T) {
	d := newDisk(t, 64<<20)
	mustMount(t, d)
	dir := filepath.Join(d.Root, "workspace")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 64123, 64123); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.Root, filepath.Dir(filepath.Dir(d.Root))} {
		if err := os.Chmod(p, 0o755); err != nil { // t.TempDir's parent is 0700
			t.Fatal(err)
		}
	}
	cmd := exec.Command("dd", "if=/dev/zero", "of="+filepath.Join(dir, "fill"), "bs=1M", "count=256")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 64123, Gid: 64123}}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "No space left") {
		t.Fatalf("an unprivileged dd of 256 MiB on a 64 MiB disk: %v\n%s; want ENOSPC", err, out)
	}
	if n := allocated(t, d.Image); n > d.Size {
		t.Fatalf("the image uses %d bytes of the host's disk; want at most %d", n, d.Size)
	}
	if err := os.WriteFile(filepath.Join(d.Root, "log"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatalf("root writing 1 MiB after the disk filled: %v; want the reserve", err)
	}
}

// TestConcurrentMountsAttachOnce: two Mounts of one image at once (two servers
// starting together) attach it once and mount it once; unlocked, they attached it to
// two loop devices in 7 of 10 rounds (the red team's probe).
func TestConcurrentMountsAttachOnce(t *testing.T) {
	d := newDisk(t, 64<<20)
	for round := range 10 {
		if round > 0 {
			if err := Unmount(d.Root); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return loopsOf(t, d) == 0 })
		}
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- Mount(context.Background(), d) }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if n, m := loopsOf(t, d), mountsAt(t, d.Root); n != 1 || m != 1 {
			t.Fatalf("round %d: the image on %d loop devices, %d mounts at the root; want 1 and 1", round, n, m)
		}
	}
}

// mountsAt counts the mounts at path.
func mountsAt(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range linux.ParseMountinfo(string(data)) {
		if m.Point == path {
			n++
		}
	}
	return n
}

// waitFor waits up to 10 s for ok (the kernel detaches an autoclear loop device just
// after its last unmount).
func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
	}
}
