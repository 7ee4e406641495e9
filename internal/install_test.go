package internal_test

import (
	"github.com/cordonhq/cordon/internal/testutil"

	"os/exec"
	"strings"
	"testing"
)

// TestMakeInstallLaysOutTheBinaries: `make install` puts cordon, cordon-engines,
// cordon-init and cordon-exec side by side in $(DESTDIR)$(PREFIX)/bin, as cordon looks for its siblings
// beside itself, and a man page per command in share/man/man1 (checked from make's own
// dry run, so nothing is built or written).
func TestMakeInstallLaysOutTheBinaries(t *testing.T) {
	_, err := exec.LookPath("make")
	testutil.Require(t, err == nil, "make is what CI runs the tests with")
	cmd := exec.Command("make", "-n", "install", "DESTDIR=/dest", "PREFIX=/opt/cordon")
	cmd.Dir = moduleRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n install: %v\n%s", err, out)
	}
	want := "install -m 0755 bin/cordon bin/cordon-engines bin/cordon-init bin/cordon-exec /dest/opt/cordon/bin/"
	if !strings.Contains(string(out), want) {
		t.Fatalf("make install does not lay out the four binaries side by side; want %q in:\n%s", want, out)
	}
	for _, want := range []string{"bin/cordon internal man bin/man/man1", "install -m 0644 bin/man/man1/*.1 /dest/opt/cordon/share/man/man1/"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make install does not install the man pages; want %q in:\n%s", want, out)
		}
	}
}
