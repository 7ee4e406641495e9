package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestServeBaseContract: `cordon serve` loads each tenant's base_contract before it
// listens: one that does not compile is refused at the config's key with the base's
// own problems at FILE:LINE:COL (exit 1); one another user may write, or one in a
// tenant's root (which a sandbox may write as root), is refused; a good one passes
// --check.
func TestServeBaseContract(t *testing.T) {
	dir := shortTempDir(t)
	cfg := filepath.Join(dir, "serve.yaml")
	base := filepath.Join(dir, "acme-base.yaml")
	writeCfg := func(basePath string) {
		t.Helper()
		mustWrite(t, cfg, "version: 1\nlisten: {unix: {path: "+filepath.Join(dir, "s.sock")+"}}\ntenants:\n"+
			"  - {name: acme, root: "+filepath.Join(dir, "acme")+", base_contract: "+basePath+"}\n")
	}
	serveCheck := func() (string, int) {
		t.Helper()
		out, err := exec.Command(testutil.Cordon(t), "serve", "--config", cfg, "--check").CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &ee):
			return string(out), ee.ExitCode()
		}
		t.Fatal(err)
		return "", 0
	}

	writeCfg(base)
	mustWrite(t, base, "version: 1\nmonitor: {mode: sometimes}\n")
	col := len("  - {name: acme, root: "+filepath.Join(dir, "acme")+", base_contract: ") + 1
	want := cfg + ":4:" + strconv.Itoa(col) + `: tenant "acme": base_contract ` + base + ` does not compile:
` + base + `:2:17: monitor.mode: want off, best-effort or required, got "sometimes"
`
	if out, code := serveCheck(); code != 1 || out != want {
		t.Errorf("a base that does not compile: exit %d\n%s\nwant exit 1\n%s", code, out, want)
	}

	mustWrite(t, base, "version: 1\nnetwork: {allow: [{host: github.com, ports: [443]}]}\n")
	if out, code := serveCheck(); code != 0 || out != cfg+": valid\n" {
		t.Errorf("a good base: exit %d %q", code, out)
	}
	if err := os.Chmod(base, 0o666); err != nil {
		t.Fatal(err)
	}
	if out, code := serveCheck(); code != 1 || !hasAll(out, "is not safe to read", "writable by group or others") {
		t.Errorf("a base others may write: exit %d\n%s", code, out)
	}

	inRoot := filepath.Join(dir, "acme", "workspaces", "w", "base.yaml")
	mustWrite(t, inRoot, "version: 1\n")
	if err := os.Chmod(filepath.Dir(inRoot), 0o700); err != nil {
		t.Fatal(err)
	}
	writeCfg(inRoot)
	if out, code := serveCheck(); code != 1 || !hasAll(out, `is inside tenant "acme"'s root`) {
		t.Errorf("a base in the tenant's root: exit %d\n%s", code, out)
	}
}

// hasAll reports whether s holds every one of subs.
func hasAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
