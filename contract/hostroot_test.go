package contract

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// testRoot builds a host's system files in a temporary directory: merged /usr with its
// top-level links (/lib32 included, /libx32 not), /var/run leading to /run, and one of
// each kind of secret "@system" hides.
func testRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/lib", "usr/lib32", "usr/lib64", "usr/sbin", "etc/ssh",
		"etc/ssl/private", "etc/sudoers.d", "etc/security", "run", "var"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"bin": "usr/bin", "lib": "usr/lib", "lib32": "usr/lib32",
		"lib64": "usr/lib64", "sbin": "usr/sbin", "var/run": "../run"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"etc/passwd", "etc/shadow", "etc/gshadow", "etc/sudoers",
		"etc/ssh/ssh_host_ed25519_key", "etc/ssh/ssh_host_ed25519_key.pub", "etc/security/opasswd"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestSystemFromRoot: "@system" is expanded from the host's root Compile is given, not
// from the machine's own "/": its links, the targets they grant and the secrets it
// hides are the root's, named as the sandbox sees them.
func TestSystemFromRoot(t *testing.T) {
	dir := filepath.Join(realTempDir(t), "ws")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := testHost(t, dir)
	p, err := Compile(Default(), h)
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	for _, l := range p.Links {
		links = append(links, l.Path+" -> "+l.Target)
	}
	want := []string{"/bin -> usr/bin", "/lib -> usr/lib", "/lib32 -> usr/lib32", "/lib64 -> usr/lib64", "/sbin -> usr/sbin"}
	if !slices.Equal(links, want) {
		t.Errorf("links %q; want %q (the root's)", links, want)
	}
	for _, m := range []struct {
		path string
		typ  MountType
		dir  bool
	}{
		{"/usr", Bind, true}, {"/etc", Bind, true},
		{"/etc/shadow", Mask, false}, {"/etc/gshadow", Mask, false}, {"/etc/sudoers", Mask, false},
		{"/etc/sudoers.d", Mask, true}, {"/etc/ssl/private", Mask, true}, {"/etc/security/opasswd", Mask, false},
		{"/etc/ssh/ssh_host_ed25519_key", Mask, false},
	} {
		got := mountAt(p, m.path)
		if got == nil || got.Type != m.typ || got.Dir != m.dir {
			t.Errorf("%s: %+v; want type %v dir %v", m.path, got, m.typ, m.dir)
		}
	}
	for _, absent := range []string{"/etc/shadow-", "/etc/gshadow-", "/etc/ssh/ssh_host_ed25519_key.pub", "/libx32", h.Root} {
		if m := mountAt(p, absent); m != nil {
			t.Errorf("%s is not in the root (or not a secret) but the plan has %+v", absent, m)
		}
	}
	for _, m := range p.Mounts {
		if within(m.Path, h.Root) {
			t.Errorf("the plan names the root's own path %s; want it as the sandbox sees it", m.Path)
		}
	}
}

// TestSystemRootLinkOut: a link in the root leading out of it is not followed to the
// machine's own files.
func TestSystemRootLinkOut(t *testing.T) {
	dir := filepath.Join(realTempDir(t), "ws")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := testHost(t, dir)
	if err := os.Symlink("../../../../../../../../../../../../../opt", filepath.Join(h.Root, "libx32")); err != nil {
		t.Fatal(err)
	}
	p, err := Compile(Default(), h)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Mounts {
		if m.Path == "/opt" || within(m.Path, h.Root) {
			t.Errorf("the link out of the root granted %+v", m)
		}
	}
}

// TestSystemRootRelative: a relative root is refused.
func TestSystemRootRelative(t *testing.T) {
	dir := filepath.Join(realTempDir(t), "ws")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := testHost(t, dir)
	h.Root = "rel"
	if _, err := Compile(Default(), h); err == nil {
		t.Error("a relative root compiled")
	}
}
