package linux

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// An overlay on an idmapped clone of a root-owned tree: the sandbox uid writes
// through it, the writes land in upper only, and the lower tree is untouched.
func TestNewOverlayIdmappedLower(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, upper, work := filepath.Join(dir, "ws"), filepath.Join(dir, "upper"), filepath.Join(dir, "work")
	for _, d := range []string{ws, upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "a"), []byte("before\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const uid = 64998
	if err := os.Chown(upper, uid, uid); err != nil {
		t.Fatal(err)
	}
	err := OnOwnThread(func() error {
		ns, err := IdmapUserns(0, uid, 0, uid)
		if err != nil {
			return err
		}
		defer ns.Close()
		lower, err := CloneTree(nil, ws, ns)
		if err != nil {
			return err
		}
		defer lower.Close()
		u, err := OpenDirNoLinks(upper)
		if err != nil {
			return err
		}
		defer u.Close()
		w, err := OpenDirNoLinks(work)
		if err != nil {
			return err
		}
		defer w.Close()
		ov, err := NewOverlay(lower, u, w)
		if err != nil {
			return err
		}
		defer ov.Close()
		if err := PrivateMountNamespace(); err != nil {
			return err
		}
		target := filepath.Join(dir, "merged")
		if err := os.Mkdir(target, 0o755); err != nil {
			return err
		}
		if err := AttachTree(ov, target); err != nil {
			return err
		}
		cmd := exec.Command("/bin/sh", "-c", "echo after > a && echo new > b && mkdir d && rm a && echo again > a")
		cmd.Dir = target
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("writing through the overlay: %v: %s", err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a")); string(b) != "before\n" {
		t.Errorf("lower changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(upper, "a")); string(b) != "again\n" {
		t.Errorf("upper a = %q", b)
	}
	if _, err := os.Lstat(filepath.Join(upper, "b")); err != nil {
		t.Errorf("upper b: %v", err)
	}
	st, err := os.Lstat(filepath.Join(upper, "b"))
	if err == nil && st.Sys().(*syscall.Stat_t).Uid != uid {
		t.Errorf("upper b owned by %d", st.Sys().(*syscall.Stat_t).Uid)
	}
}
