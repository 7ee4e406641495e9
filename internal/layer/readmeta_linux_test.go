package layer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

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
		if err := unix.Lsetxattr(plain, a, v, 0); err != nil {
			t.Fatalf("%s: %v", a, err)
		}
	}
	for i := range 34 {
		if err := unix.Lsetxattr(many, fmt.Sprintf("user.a%02d", i), []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Read(upper)
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
