package container

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/linux"
)

// The host view's root is traversable by the container's uid whatever cordon's umask
// (a session's supervisor runs with 077).
func TestMakeSkeletonIgnoresUmask(t *testing.T) {
	old := linux.Umask(0o077)
	defer linux.Umask(old)
	in := testInput(false)
	in.Plan.Links = []contract.Link{{Path: "/bin", Target: "usr/bin"}, {Path: "/usr/local/lib64", Target: "lib"}}
	dir := filepath.Join(t.TempDir(), "rootfs")
	if err := MakeSkeleton(dir, in); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "usr"), filepath.Join(dir, "usr", "local")} {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, %v; want mode 0755", d, st.Mode(), err)
		}
	}
}
