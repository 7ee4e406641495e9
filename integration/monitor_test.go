package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

func TestMonitorKillStopsTheRun(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, on_violation: kill, exec: [sh, cat, \"true\"]}\n")
	// The kill follows the alert (the monitor records, then stops the run: milliseconds
	// later, longer through an engine's API), so the next step waits a moment.
	r := w.sh("cat /etc/hostname >/dev/null; python3 -c 'open(\"pwned\", \"w\")'; sleep 2; echo survived > after.txt")
	if r.code != 137 {
		t.Fatalf("want 137 when the monitor stops the run, got %v", r)
	}
	assertContains(t, "stderr", r.stderr, "cordon: stopped by the monitor: execve")
	assertContains(t, "stderr", r.stderr, "absent from monitor.exec")
	assertAbsent(t, filepath.Join(w.ws, "after.txt"))
	var alerts int
	for _, rec := range lastRun(t, w) {
		if rec.Type == "syscall.alert" {
			alerts++
			if rec.Cmd == "" {
				t.Errorf("alert not joined to its command: %s", rec.Body)
			}
		}
		if rec.Type == "run.end" {
			assertContains(t, "run.end", string(rec.Body), `"reason":"monitor"`)
		}
	}
	if alerts == 0 {
		t.Error("no syscall.alert in the log")
	}
}

func TestMonitorAlertsWithoutKilling(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, cat, \"true\"]}\n")
	r := w.sh("cat /etc/shadow 2>/dev/null; cat /etc/shadow 2>/dev/null; echo done")
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("alert mode must not stop the command: %v", r)
	}
	found := false
	for _, rec := range lastRun(t, w) {
		if rec.Type == "syscall.alert" && strings.Contains(string(rec.Body), "/etc/shadow") {
			found = true
			assertContains(t, "alert", string(rec.Body), `"category":"read of a hidden path"`)
		}
	}
	if !found {
		t.Error("reading /etc/shadow raised no alert")
	}
	// The run ends with one line per kind of alert, counted, without the contract's why.
	assertContains(t, "run stderr", r.stderr, "cordon: monitor alert: read of a hidden path: /etc/shadow (openat, 2 times)\n")
	if strings.Contains(r.stderr, "host secrets") || strings.Contains(r.stderr, "@system") {
		t.Errorf("the summary shows the contract's wording: %q", r.stderr)
	}
	id := w.startSession()
	r = w.cordon("", "exec", id, "--json", "--", "sh", "-c", "cat /etc/shadow 2>/dev/null; sleep 1; true")
	var js struct {
		Alerts []struct {
			Category, Target, Syscall string
			Count                     int
		} `json:"alerts"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
		t.Fatalf("exec --json: %v: %v", err, r)
	}
	if len(js.Alerts) != 1 || js.Alerts[0].Category != "read of a hidden path" || js.Alerts[0].Target != "/etc/shadow" || js.Alerts[0].Count != 1 {
		t.Errorf("exec --json alerts %+v from %s", js.Alerts, r.stdout)
	}
}

// TestMonitorRequiredRefusesWithoutPrivileges runs cordon as an unprivileged user, who
// can build a bwrap sandbox but cannot load BPF: required refuses, best-effort warns.
func TestMonitorRequiredRefusesWithoutPrivileges(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	for _, d := range []string{w.ws, w.home, filepath.Dir(w.ws)} {
		os.Chown(d, 65534, 65534)
	}
	for d := filepath.Dir(filepath.Dir(w.ws)); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755) // t.TempDir's parents are 0700
	}
	filepath.Walk(w.home, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, 65534, 65534) })
	// A short runtime directory: unix socket paths are limited to 107 bytes.
	xdg, err := os.MkdirTemp("/tmp", "xdg-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(xdg)
	os.Chown(xdg, 65534, 65534)
	os.Chown(w.runRoot, 65534, 65534) // the world's run root is nobody's here
	run := func(mode string) result {
		w.contract("version: 1\nmonitor: {mode: " + mode + ", exec: [sh, \"true\"]}\n")
		os.Chown(filepath.Join(w.ws, "cordon.yaml"), 65534, 65534)
		// A run that hangs is stopped with SIGQUIT, which makes cordon print every
		// goroutine's stack: a failure that says where it hung, not a test timeout.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, testutil.Cordon(t), "run", "--", "sh", "-c", "echo ran > ran.txt")
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGQUIT) }
		cmd.WaitDelay = 10 * time.Second
		cmd.Dir = w.ws
		cmd.Env = append(w.env, "XDG_RUNTIME_DIR="+xdg)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("cordon as nobody (monitor %s) hung; its stacks:\n%s", mode, errb.String())
		}
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("running cordon as nobody: %v", err)
		}
		return result{stdout: out.String(), stderr: errb.String(), code: code}
	}
	r := run("required")
	if r.code != 125 {
		t.Fatalf("required without privileges: want 125, got %v", r)
	}
	assertContains(t, "stderr", r.stderr, "monitor.mode is required but the syscall monitor cannot run")
	assertAbsent(t, filepath.Join(w.ws, "ran.txt"))
	r = run("best-effort")
	if r.code != 0 {
		t.Fatalf("best-effort without privileges must run: %v", r)
	}
	assertContains(t, "stderr", r.stderr, "warning: the syscall monitor is not running")
	// Without a cgroup it can write, cordon cannot enforce the default limits: it says so.
	assertContains(t, "stderr", r.stderr, "warning: the default limits (memory, pids) are not enforced")
}
