package creds_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
)

// diskDir is an empty directory on a file system that keeps its files on disk, for
// WriteFiles to refuse: the test's temporary directory, unless that is in memory (a
// /tmp on tmpfs, Debian's default from trixie on and Fedora's, Arch's), then one
// under /var/tmp or the package's own directory.
func diskDir(t *testing.T) string {
	t.Helper()
	for _, parent := range []string{"", "/var/tmp", "."} {
		dir := t.TempDir()
		if parent != "" {
			d, err := os.MkdirTemp(parent, "cordon-creds-disk-")
			if err != nil {
				continue
			}
			t.Cleanup(func() { os.RemoveAll(d) })
			dir = d
		}
		if typ, err := linux.FilesystemType(dir); err == nil && typ != 0x01021994 && typ != 0x858458f6 {
			abs, _ := filepath.Abs(dir)
			return abs
		}
	}
	t.Fatal("no directory on a disk file system: the test's temporary directory, /var/tmp and the package's are all in memory")
	return ""
}
