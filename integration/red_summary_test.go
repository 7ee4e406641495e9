package integration

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRedSummaryConcealedByTheWorkload (red team): on a terminal the
// command's output and cordon's end-of-run lines share stderr, and cordon writes its
// lines after whatever state the command left the terminal in. A command that ends
// with ESC[8m (conceal; or black on black, ESC[30;40m) makes every following
// "cordon: monitor alert" line invisible, and the person never sees the alert. cordon
// should reset the attributes (ESC[0m, and start a new line) before its own lines when
// stderr is a terminal.
func TestRedSummaryConcealedByTheWorkload(t *testing.T) {
	testutil.RequireRoot(t)
	_, err := exec.LookPath("script")
	testutil.Require(t, err == nil, "script(1) (bsdutils) gives cordon a terminal")
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, cat]}\n")
	inner := testutil.Cordon(t) + ` run -- sh -c 'cat /etc/shadow 2>/dev/null; printf "\033[8m" >&2'`
	cmd := exec.Command("script", "-qec", inner, "/dev/null")
	cmd.Dir, cmd.Env = w.ws, w.env
	out, _ := cmd.CombinedOutput()
	s := string(out)
	alert := strings.Index(s, "cordon: monitor alert")
	if alert < 0 {
		t.Fatalf("no alert line on the terminal: %q", s)
	}
	conceal := strings.LastIndex(s[:alert], "\x1b[8m")
	if conceal >= 0 && !strings.Contains(s[conceal:alert], "\x1b[0m") && !strings.Contains(s[conceal:alert], "\x1b[m") {
		t.Errorf("cordon's alert line is written in the concealed state the workload left: %q", s)
	}
}
