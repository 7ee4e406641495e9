package layer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestReadNamesMetadataItDoesNotLand: set-id and sticky bits, attributes of other
// namespaces than user.* (but overlay's own) and user.* past the bound are named as
// problems; the change still lands, without them.
func TestReadNamesMetadataItDoesNotLand(t *testing.T) {
	testutil.RequireRoot(t) // trusted.* are root's
	upper := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(upper, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("suid", os.ModeSetuid|0o755)
	plain := write("plain", 0o644)
	many := write("many", 0o644)
	for _, a := range []string{"user.ok", "trusted.overlay.origin", "trusted.evil", "security.capability"} {
		v := []byte("v")
		if a == "security.capability" {
			// A v2 capability set (cap_net_raw): the kernel checks its form.
			v = []byte{0, 0, 0, 2, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		}
		if err := linux.Lsetxattr(plain, a, string(v)); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	for i := range 34 {
		if err := linux.Lsetxattr(many, fmt.Sprintf("user.a%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Read(upper, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Changes) != 3 {
		t.Errorf("changes: %+v", s.Changes)
	}
	got := map[string]string{}
	for _, p := range s.Problems {
		got[p.Path] += p.Why
	}
	for path, want := range map[string][]string{
		"suid":  {"set-id or sticky bits", "as 0755"},
		"plain": {`"trusted.evil"`, `"security.capability"`},
		"many":  {`"user.a32", "user.a33"`},
	} {
		for _, w := range want {
			if !strings.Contains(got[path], w) {
				t.Errorf("%s: problems %q, want %q", path, got[path], w)
			}
		}
	}
	if strings.Contains(got["plain"], "user.ok") || strings.Contains(got["plain"], "overlay") {
		t.Errorf("plain: names what lands or overlay's own: %q", got["plain"])
	}
}

// TestReadBounded: Read holds at most max entries of an upper directory, counting the
// names of one directory as it reads them and those below, and refuses past that.
func TestReadBounded(t *testing.T) {
	upper := t.TempDir()
	for i := range 30 {
		if err := os.WriteFile(filepath.Join(upper, fmt.Sprintf("f%02d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(upper, "d", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	if s, err := Read(upper, "", 32); err != nil || len(s.Changes) != 32 {
		t.Fatalf("Read at its bound: %v, want 32 changes", err)
	}
	for _, max := range []int{0, 10, 30, 31} {
		if _, err := Read(upper, "", max); !errors.Is(err, ErrTooMany) {
			t.Errorf("Read of 32 entries with max %d: %v, want ErrTooMany", max, err)
		}
	}
}
