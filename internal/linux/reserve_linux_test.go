package linux_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestWithoutReserve: on an ext4 with root's 5% reserve, writes made WithoutReserve
// stop at ENOSPC where an unprivileged user's would, root's plain writes still find
// the reserve afterwards, and the files made are root's to read and NoReserveUID's.
func TestWithoutReserve(t *testing.T) {
	testutil.RequireRoot(t)
	mke2fs, err := exec.LookPath("mke2fs")
	testutil.Require(t, err == nil, "mke2fs (e2fsprogs) not installed")
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "img"), filepath.Join(dir, "mnt")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 32<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mke2fs, "-q", "-F", "-t", "ext4", "-m", "5", img).CombinedOutput(); err != nil {
		t.Fatalf("mke2fs: %v: %s", err, out)
	}
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	loop, err := linux.AttachLoop(f)
	if err != nil {
		t.Fatal(err)
	}
	err = linux.MountExt4(loop.Name(), mnt)
	loop.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = linux.Unmount(mnt) })

	fill := filepath.Join(mnt, "fill")
	err = linux.WithoutReserve(func() error {
		out, err := os.OpenFile(fill, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		defer out.Close()
		buf := make([]byte, 1<<20)
		for {
			if _, err := out.Write(buf); err != nil {
				return err
			}
		}
	})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling without the reserve: %v; want ENOSPC", err)
	}
	size, avail, err := linux.FSSpace(mnt)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	if free := int64(st.Bfree) * st.Bsize; free < size/50 {
		t.Fatalf("%d of %d bytes left for root after filling without the reserve (%d for others): the reserve was used", free, size, avail)
	}
	fi, err := os.Stat(fill)
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != linux.NoReserveUID {
		t.Errorf("the filled file is uid %d's; want %d", uid, uint32(linux.NoReserveUID))
	}
	// Root's own write still has the reserve.
	if err := os.WriteFile(filepath.Join(mnt, "log"), make([]byte, 256<<10), 0o600); err != nil {
		t.Fatalf("root's write after the fill: %v", err)
	}
	// And the thread that wrote without it is gone: this goroutine is root's.
	if err := os.WriteFile(filepath.Join(mnt, "log2"), make([]byte, 64<<10), 0o600); err != nil {
		t.Fatalf("root's second write: %v", err)
	}
}
