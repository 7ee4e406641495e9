package hostexec

import (
	"context"
	"errors"
	"github.com/cordonhq/cordon/internal/testutil"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree makes a directory the checks trust (owned by the test's uid, mode 0755) with
// a workspace and an extra writable path inside it.
func tree(t *testing.T) (root, ws, extra string) {
	t.Helper()
	root = t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, extra = filepath.Join(root, "ws"), filepath.Join(root, "extra")
	for _, d := range []string{ws, extra, filepath.Join(root, "bin")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root, ws, extra
}

func write(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func run(t *testing.T, p *Program, args ...string) string {
	t.Helper()
	out, err := p.Command(context.Background(), args, []string{"PATH=/usr/bin:/bin"}).CombinedOutput()
	if err != nil {
		t.Fatalf("running %s: %v: %s", p.Name, err, out)
	}
	return string(out)
}

func TestResolveRefuses(t *testing.T) {
	root, ws, extra := tree(t)
	pol := Policy{Untrusted: []string{ws, extra}, Invoker: -1}
	script := "#!/bin/sh\necho ran\n"
	cases := []struct {
		name  string
		setup func(t *testing.T) string // returns the program's path
		want  string
	}{
		{"in the workspace", func(t *testing.T) string {
			p := filepath.Join(ws, "mint")
			write(t, p, script, 0o755)
			return p
		}, "the workspace or a path the sandbox can write"},
		{"in a writable extra path", func(t *testing.T) string {
			p := filepath.Join(extra, "mint")
			write(t, p, script, 0o755)
			return p
		}, "the workspace or a path the sandbox can write"},
		{"group-writable", func(t *testing.T) string {
			p := filepath.Join(root, "bin", "gw")
			write(t, p, script, 0o775)
			return p
		}, "writable by group or others"},
		{"in a directory owned by another uid", func(t *testing.T) string {
			d := filepath.Join(root, "other")
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(d, "mint")
			write(t, p, script, 0o755)
			if err := os.Chown(d, 4242, 4242); err != nil {
				testutil.Require(t, false, "cannot chown (not root): "+err.Error())
			}
			return p
		}, "directory owned by uid 4242"},
		{"owned by another uid", func(t *testing.T) string {
			p := filepath.Join(root, "bin", "theirs")
			write(t, p, script, 0o755)
			if err := os.Chown(p, 4242, 4242); err != nil {
				testutil.Require(t, false, "cannot chown (not root): "+err.Error())
			}
			return p
		}, "owned by uid 4242"},
		{"in a group-writable directory", func(t *testing.T) string {
			d := filepath.Join(root, "gwdir")
			if err := os.Mkdir(d, 0o775); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(d, 0o775); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(d, "mint")
			write(t, p, script, 0o755)
			return p
		}, "directory writable by group or others"},
		{"owned by another uid in a sticky directory", func(t *testing.T) string {
			d := filepath.Join(root, "sticky")
			if err := os.Mkdir(d, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(d, os.ModeSticky|0o777); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(d, "mint")
			write(t, p, script, 0o755)
			if err := os.Chown(p, 4242, 4242); err != nil {
				testutil.Require(t, false, "cannot chown (not root): "+err.Error())
			}
			return p
		}, "in a directory others can write"},
		{"a script whose interpreter is in the workspace", func(t *testing.T) string {
			write(t, filepath.Join(ws, "interp"), "#!/bin/sh\nexec /bin/sh \"$@\"\n", 0o755)
			p := filepath.Join(root, "bin", "viaws")
			write(t, p, "#!"+filepath.Join(ws, "interp")+"\necho ran\n", 0o755)
			return p
		}, "the workspace or a path the sandbox can write"},
		{"a script whose env interpreter is in the workspace", func(t *testing.T) string {
			write(t, filepath.Join(ws, "wsinterp"), "#!/bin/sh\nexec /bin/sh \"$@\"\n", 0o755)
			p := filepath.Join(root, "bin", "viaenv")
			write(t, p, "#!/usr/bin/env wsinterp\necho ran\n", 0o755)
			return p
		}, "the workspace or a path the sandbox can write"},
		{"a link into the workspace", func(t *testing.T) string {
			write(t, filepath.Join(ws, "real"), script, 0o755)
			p := filepath.Join(root, "bin", "link")
			if err := os.Symlink(filepath.Join(ws, "real"), p); err != nil {
				t.Fatal(err)
			}
			return p
		}, "the workspace or a path the sandbox can write"},
		{"a link in the workspace to a trusted file", func(t *testing.T) string {
			write(t, filepath.Join(root, "bin", "good"), script, 0o755)
			p := filepath.Join(ws, "goodlink")
			if err := os.Symlink(filepath.Join(root, "bin", "good"), p); err != nil {
				t.Fatal(err)
			}
			return p
		}, "the workspace or a path the sandbox can write"},
		{"a relative interpreter", func(t *testing.T) string {
			p := filepath.Join(root, "bin", "rel")
			write(t, p, "#!sh\necho ran\n", 0o755)
			return p
		}, "relative interpreter"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := c.setup(t)
			p, err := Resolve(path, ws+":/usr/bin:/bin", pol)
			if err == nil {
				p.Close()
				t.Fatalf("Resolve(%s) = ok; want a refusal", path)
			}
			if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Resolve(%s) = %v; want ErrUntrusted with %q", path, err, c.want)
			}
		})
	}
}

func TestResolveRunsChecked(t *testing.T) {
	root, ws, extra := tree(t)
	pol := Policy{Untrusted: []string{ws, extra}, Invoker: -1}
	bin := filepath.Join(root, "bin")
	write(t, filepath.Join(bin, "plain"), "#!/bin/sh -e\necho \"plain $*\"\n", 0o755)
	write(t, filepath.Join(bin, "viaenv"), "#!/usr/bin/env sh\necho \"env $*\"\n", 0o755)
	write(t, filepath.Join(bin, "nested"), "#!"+filepath.Join(bin, "plain")+"\n", 0o755)
	if err := os.Symlink("plain", filepath.Join(bin, "rel")); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"plain":  "plain a b\n",
		"viaenv": "env a b\n",
		"rel":    "plain a b\n",
		// The kernel would run plain with the nested script's path, then a and b.
		"nested": "plain /dev/fd/3 a b\n",
	} {
		p, err := Resolve(filepath.Join(bin, name), "/usr/bin:/bin", pol)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", name, err)
		}
		if got := run(t, p, "a", "b"); got != want {
			t.Errorf("%s printed %q; want %q", name, got, want)
		}
		p.Close()
	}
	// A name is looked up in the PATH given, and an ELF program's loader is checked.
	p, err := Resolve("true", "relative:/usr/bin:/bin", pol)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Chain[0].Loader == "" && !strings.Contains(p.Path(), "busybox") {
		t.Logf("%s has no ELF interpreter (static?)", p.Path())
	}
	run(t, p)
}

// TestResolveSwap swaps the program for another after the check: what runs is what
// was checked, because it runs through the checked descriptor.
func TestResolveSwap(t *testing.T) {
	root, ws, _ := tree(t)
	pol := Policy{Untrusted: []string{ws}, Invoker: -1}
	path := filepath.Join(root, "bin", "mint")
	write(t, path, "#!/bin/sh\necho checked\n", 0o755)
	p, err := Resolve(path, "", pol)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// The swap: a new file renamed over the name, and then a link into the workspace.
	write(t, filepath.Join(root, "bin", "evil"), "#!/bin/sh\necho swapped\n", 0o755)
	if err := os.Rename(filepath.Join(root, "bin", "evil"), path); err != nil {
		t.Fatal(err)
	}
	if got := run(t, p); got != "checked\n" {
		t.Fatalf("after a rename over it, the program printed %q; want what was checked", got)
	}
	write(t, filepath.Join(ws, "evil"), "#!/bin/sh\necho swapped\n", 0o755)
	os.Remove(path)
	if err := os.Symlink(filepath.Join(ws, "evil"), path); err != nil {
		t.Fatal(err)
	}
	if got := run(t, p); got != "checked\n" {
		t.Fatalf("after a link swap, the program printed %q; want what was checked", got)
	}
	if q, err := Resolve(path, "", pol); err == nil {
		q.Close()
		t.Fatal("the link into the workspace passed a new check")
	}
}
