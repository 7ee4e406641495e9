package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

// loadRefused asserts Load refuses p with an error saying want, as not safe to trust.
func loadRefused(t *testing.T, what, p, want string) {
	t.Helper()
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: got %v; want refused with %q", what, err, want)
	} else if want != "bytes" && !errors.Is(err, paths.ErrUnsafe) {
		t.Errorf("%s: %v does not wrap paths.ErrUnsafe", what, err)
	}
}

// TestLoadRefusesWritableByOthers: a config someone else could have written is not read.
func TestLoadRefusesWritableByOthers(t *testing.T) {
	p := filepath.Join(t.TempDir(), "serve.yaml")
	if err := os.WriteFile(p, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Fatalf("mode 0600: %v", err)
	}
	os.Chmod(p, 0o620)
	loadRefused(t, "mode 0620", p, "writable by group or others")
	os.Chmod(p, 0o600)
	if os.Geteuid() == 0 {
		os.Chown(p, 65534, -1)
		loadRefused(t, "owned by uid 65534", p, "owned by uid 65534")
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	os.WriteFile(big, make([]byte, MaxSize+1), 0o600)
	loadRefused(t, "a file over MaxSize", big, "bytes")
}

// TestLoadRefusesReplaceable: a config another user could replace is not read: a
// symbolic link to a root-owned file someone else chose (red team F4: a sandbox writes
// root's files in its workspace), a file in a directory another user owns or may
// write, a file in a tenant's root.
func TestLoadRefusesReplaceable(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	workspace := filepath.Join(top, "workspace")
	os.Mkdir(workspace, 0o755)
	evil := filepath.Join(workspace, "evil.yaml")
	os.WriteFile(evil, []byte(good), 0o644)

	link := filepath.Join(t.TempDir(), "serve.yaml")
	os.Symlink(evil, link)
	loadRefused(t, "a symbolic link", link, "symbolic link")

	nobodys := filepath.Join(top, "nobody")
	os.Mkdir(nobodys, 0o755)
	os.Chown(nobodys, 65534, 65534)
	inNobodys := filepath.Join(nobodys, "serve.yaml")
	os.WriteFile(inNobodys, []byte(good), 0o600)
	loadRefused(t, "a directory owned by nobody", inNobodys, "owned by uid 65534")
	os.Symlink(evil, filepath.Join(nobodys, "link.yaml"))
	loadRefused(t, "a link in a directory owned by nobody", filepath.Join(nobodys, "link.yaml"), "owned by uid 65534")

	open := filepath.Join(top, "open")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	inOpen := filepath.Join(open, "serve.yaml")
	os.WriteFile(inOpen, []byte(good), 0o600)
	loadRefused(t, "a directory anyone may write", inOpen, "writable by group or others")

	root := filepath.Join(top, "tenant")
	os.Mkdir(root, 0o700)
	inRoot := filepath.Join(root, "serve.yaml")
	os.WriteFile(inRoot, []byte(strings.Replace(good, "/srv/cordon/acme", root, 1)), 0o600)
	loadRefused(t, "a file in a tenant's root", inRoot, `inside tenant "acme"'s root`)
}
