package linux

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// AttachBeneath mounts a clone read-only at a name of a tree, and refuses a name that
// is a link, is missing, or is not the file the clone was made from (renamed or
// replaced since): the mount would land elsewhere, or put one file's clone over
// another.
func TestAttachBeneath(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	err := OnOwnThread(func() error {
		if err := PrivateMountNamespace(); err != nil {
			return err
		}
		if err := MountTmpfs(dir); err != nil {
			return err
		}
		for _, d := range []string{"a", "b"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				return err
			}
		}
		if err := os.Symlink("/etc", filepath.Join(dir, "l")); err != nil {
			return err
		}
		root, err := os.Open(dir)
		if err != nil {
			return err
		}
		defer root.Close()
		clone := func() (*os.File, error) { return CloneTree(root, "a", nil) }
		for _, c := range []struct {
			rel  string
			same bool
			want error
		}{
			{"b", true, ErrSwapped},
			{"l", false, syscall.ELOOP},
			{"l/ssl", false, syscall.ELOOP},
			{"../a", false, syscall.EXDEV},
			{"nope", false, syscall.ENOENT},
		} {
			f, err := clone()
			if err != nil {
				return err
			}
			err = AttachBeneath(f, root, c.rel, c.same)
			f.Close()
			if !errors.Is(err, c.want) {
				t.Errorf("attaching at %q: %v; want %v", c.rel, err, c.want)
			}
		}
		f, err := clone()
		if err != nil {
			return err
		}
		defer f.Close()
		if err := AttachBeneath(f, root, "a", true); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "a", "x"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
			t.Errorf("writing below the attached clone: %v; want EROFS", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "b", "x"), nil, 0o644); err != nil {
			t.Errorf("writing beside it: %v", err)
		}
		var st syscall.Statfs_t
		if err := syscall.Statfs(filepath.Join(dir, "a"), &st); err != nil {
			return err
		}
		const want = 0x1 | 0x2 | 0x4 // ST_RDONLY | ST_NOSUID | ST_NODEV
		if st.Flags&want != want {
			t.Errorf("the attached clone's flags are %#x; want read-only, nosuid and nodev", st.Flags)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
