package linux

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestSysctlTreeIsItsOwn: the tree is a procfs's sys directory, read-only, on a file
// system instance of its own: not the host's /proc (another device), its inodes made
// now (not when a host process first looked them up), nothing of /proc's pids in it.
func TestSysctlTreeIsItsOwn(t *testing.T) {
	testutil.RequireRoot(t)
	before := time.Now().Add(-time.Second)
	f, err := NewSysctlTree()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root := FDPath(f)
	if b, err := os.ReadFile(filepath.Join(root, "kernel/ostype")); err != nil || strings.TrimSpace(string(b)) != "Linux" {
		t.Fatalf("kernel/ostype in the tree: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(root, "kernel/hostname"), []byte("x"), 0); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("a write to kernel/hostname: %v, want a read-only file system", err)
	}
	var mine, host syscall.Stat_t
	if err := syscall.Stat(filepath.Join(root, "kernel/ostype"), &mine); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat("/proc/sys/kernel/ostype", &host); err != nil {
		t.Fatal(err)
	}
	if mine.Dev == host.Dev {
		t.Errorf("the tree is on the host's procfs (device %d)", host.Dev)
	}
	if mt := time.Unix(mine.Mtim.Unix()); mt.Before(before) {
		t.Errorf("kernel/ostype's time %v is older than the tree (%v): an inode someone else made", mt, before)
	}
	if ents, err := os.ReadDir(root); err != nil || len(ents) == 0 {
		t.Fatalf("the tree lists %d entries, %v", len(ents), err)
	} else {
		for _, e := range ents {
			if strings.Trim(e.Name(), "0123456789") == "" {
				t.Errorf("a pid (%s) in the sysctl tree", e.Name())
			}
		}
	}
}
