package gate

import (
	"os"
	"path/filepath"
	"testing"
)

// TestReadRefsRefusesLinks: the sandbox writes .git; a link anywhere in what the gate
// reads (HEAD, packed-refs, a loose ref, a directory of refs, .git itself), even one
// that stays inside .git, makes the repository unreadable rather than redirecting a
// read. A plain repository reads.
func TestReadRefsRefusesLinks(t *testing.T) {
	const oid = "0123456789012345678901234567890123456789"
	for _, c := range []struct {
		name  string
		plant func(t *testing.T, ws, git string)
		ok    bool
	}{
		{"plain", func(*testing.T, string, string) {}, true},
		{"HEAD a link inside", func(t *testing.T, _, git string) {
			mustDo(t, os.Remove(filepath.Join(git, "HEAD")))
			mustDo(t, os.Symlink("refs/heads/main", filepath.Join(git, "HEAD")))
		}, false},
		{"packed-refs a link inside", func(t *testing.T, _, git string) {
			mustDo(t, os.WriteFile(filepath.Join(git, "stash"), []byte(oid+" refs/heads/x\n"), 0o600))
			mustDo(t, os.Symlink("stash", filepath.Join(git, "packed-refs")))
		}, false},
		{"loose ref a link", func(t *testing.T, _, git string) {
			mustDo(t, os.Symlink("main", filepath.Join(git, "refs/heads/other")))
		}, false},
		{"refs a link inside", func(t *testing.T, _, git string) {
			mustDo(t, os.Rename(filepath.Join(git, "refs"), filepath.Join(git, "refs2")))
			mustDo(t, os.Symlink("refs2", filepath.Join(git, "refs")))
		}, false},
		{".git a link", func(t *testing.T, ws, git string) {
			mustDo(t, os.Rename(git, filepath.Join(ws, "real.git")))
			mustDo(t, os.Symlink("real.git", git))
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			git := filepath.Join(ws, ".git")
			mustDo(t, os.MkdirAll(filepath.Join(git, "refs/heads"), 0o700))
			mustDo(t, os.WriteFile(filepath.Join(git, "HEAD"), []byte("ref: refs/heads/main\n"), 0o600))
			mustDo(t, os.WriteFile(filepath.Join(git, "refs/heads/main"), []byte(oid+"\n"), 0o600))
			c.plant(t, ws, git)
			rr, err := readRefs(git)
			if c.ok {
				if err != nil || rr.headOID != oid || rr.headRef != "refs/heads/main" {
					t.Fatalf("readRefs = %+v, %v; want HEAD at main %s", rr, err, oid)
				}
				return
			}
			if err == nil {
				t.Fatalf("readRefs read through a link: %+v", rr)
			}
		})
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
