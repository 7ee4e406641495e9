package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRedACordonExecEscapes (red team A): the strings of a session command's result
// that cordon-exec ends with on the user's terminal, the destinations it was denied
// and the paths of its monitor alerts, are the sandbox's choosing; they arrive escaped.
func TestRedACordonExecEscapes(t *testing.T) {
	w := newWorld(t)
	testutil.RequireRoot(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, mkdir, cp, \"true\"]}\n")
	mustWrite(t, filepath.Join(w.ws, "names.pl"), hostileNames)
	id := w.startSession()
	run := func(argv ...string) result {
		cmd := exec.Command(testutil.CordonExec(t), append([]string{id, "--"}, argv...)...)
		cmd.Dir, cmd.Env = w.ws, w.env
		return runResult(t, cmd, "cordon-exec")
	}
	denied := run("perl", "names.pl", "0", "1")
	// An interpreter monitor.exec does not name, copied into directories with hostile
	// names and run there; its own stderr goes nowhere, so all that is left is
	// cordon-exec's.
	alerted := run("sh", "-c", `for n in "a$(printf '\033[2J\007')b" "c$(printf '\342\200\256')d"; do mkdir "$n" && cp "$(command -v perl)" "$n/perl" && "./$n/perl" -e 1; done 2>/dev/null; true`)
	assertContains(t, "cordon-exec's denials", denied.stderr, `cordon: egress denied: a\x1b[2J\x1b]0;pwned\x07.example:443`)
	assertContains(t, "cordon-exec's alerts", alerted.stderr, `a\x1b[2J\x07b`)
	assertContains(t, "cordon-exec's alerts", alerted.stderr, `c\u202ed`)
	for what, out := range map[string]string{"denials": denied.stderr, "alerts": alerted.stderr} {
		for _, bad := range []string{"\x1b", "\x07", "\x00", "\u202e", "\ncordon: egress allowed"} {
			if strings.Contains(out, bad) {
				t.Errorf("cordon-exec's %s write %q from a name the sandbox chose:\n%s", what, bad, out)
			}
		}
	}
}
