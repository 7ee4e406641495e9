package integration

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// TestServeQuotaConfigErrors: bad quotas are refused by `cordon serve` before anything
// listens, each at FILE:LINE:COL, exit 1; good ones pass --check.
func TestServeQuotaConfigErrors(t *testing.T) {
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "s.sock")
	bad := filepath.Join(dir, "bad.yaml")
	mustWrite(t, bad, `version: 1
listen: {unix: {path: `+sock+`}}
tenants:
  - name: acme
    root: /srv/acme
    quotas:
      sessions: 0
      memory: 1MiB
      cpu: -1
      wall: 1y
      session_default: {pids: 10}
`)
	out, err := exec.Command(testutil.Cordon(t), "serve", "--config", bad).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("invalid quotas: %v; want exit 1\n%s", err, out)
	}
	want := bad + `:7:17: quotas.sessions: 0 is out of range [1, 100000]
` + bad + `:9:12: quotas.cpu: want a positive number of CPUs (e.g. 2 or 0.5), got "-1"
` + bad + `:10:13: quotas.wall: invalid duration "1y" (want e.g. 30m, 2h, 8h)
` + bad + `:7:7: quotas.memory: 1048576 bytes is too small to start any session (minimum 4MiB)
`
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	good := filepath.Join(dir, "good.yaml")
	mustWrite(t, good, "version: 1\nlisten: {unix: {path: "+sock+"}}\ntenants:\n  - name: a\n    root: /srv/a\n"+
		"    quotas: {sessions: 10, memory: 20GiB, pids: 10000, cpu: 2.5, wall: 8h, audit: 10GiB, session_default: {memory: 2GiB}}\n")
	out, err = exec.Command(testutil.Cordon(t), "serve", "--config", good, "--check").CombinedOutput()
	if err != nil || string(out) != good+": valid\n" {
		t.Errorf("--check: %v %q; want %q", err, out, good+": valid\n")
	}
}
