package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// dialControl is a command dialling cordon's control socket as process 1 does
// (SOCK_SEQPACKET); the listener is closed by then, so it is refused.
var dialControl = []string{"socat", "-u", "OPEN:/dev/null", "UNIX-CONNECT:/run/cordon/control.sock,type=5"}

// syscallAlerts decodes the syscall.alert events of a run's log.
func syscallAlerts(t *testing.T, recs []audit.Record) []event.SyscallAlertBody {
	t.Helper()
	var out []event.SyscallAlertBody
	for _, rec := range recs {
		if rec.Type != event.SyscallAlert {
			continue
		}
		var a event.SyscallAlertBody
		if err := rec.DecodeBody(&a); err != nil {
			t.Fatalf("syscall.alert body: %v: %s", err, rec.Body)
		}
		out = append(out, a)
	}
	return out
}

// assertControlAlert checks that the log's only alerts are one connect to the control
// socket by socat: process 1's own connect (comm "cordon") raised none.
func assertControlAlert(t *testing.T, recs []audit.Record, action string) {
	t.Helper()
	alerts := syscallAlerts(t, recs)
	if len(alerts) != 1 {
		t.Fatalf("%d syscall.alert events; want one, the command's connect: %+v", len(alerts), alerts)
	}
	a := alerts[0]
	if a.Comm != "socat" || a.Syscall != "connect" || a.Addr != "unix:/run/cordon/control.sock" ||
		a.Rule != "connect" || a.Category != "connect to cordon's control socket" || a.Action != action {
		t.Errorf("alert = %+v; want socat's connect to unix:/run/cordon/control.sock, category \"connect to cordon's control socket\", action %s", a, action)
	}
}

// TestMonitorAlertsOnControlSocketConnect: only process 1 may dial cordon's control
// socket, once, before any command runs. A command that dials it later is refused (the
// listener is closed) and, now, seen: one alert with its own category, in a run, in a
// session and in a staged run, and in kill mode it stops the run, as any connect
// alert does. Process 1's own connect raises none.
func TestMonitorAlertsOnControlSocketConnect(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.Require(t, haveCmd("socat"), "socat is needed to dial a SOCK_SEQPACKET socket (scripts/deps.sh installs it)")
	// Each case a world of its own, so that its last run is the one it made.
	world := func(t *testing.T) *world {
		w := newWorld(t)
		w.contract("version: 1\nmonitor: {mode: required, exec: [socat]}\n")
		return w
	}
	t.Run("run", func(t *testing.T) {
		w := world(t)
		r := w.cordon("", append([]string{"run", "--"}, dialControl...)...)
		if r.code == 0 || !strings.Contains(r.stderr, "Connection refused") {
			t.Fatalf("the command reached the control socket: %v", r)
		}
		assertContains(t, "stderr", r.stderr, "cordon: monitor alert: connect to cordon's control socket: unix:/run/cordon/control.sock (connect, once)\n")
		assertControlAlert(t, lastRun(t, w), "alert")
	})
	t.Run("staged", func(t *testing.T) {
		w := world(t)
		r := w.cordon("", append([]string{"run", "--stage", "--"}, dialControl...)...)
		if r.code == 0 || !strings.Contains(r.stderr, "Connection refused") || !strings.Contains(r.stderr, "staged run ") {
			t.Fatalf("want a staged run whose command was refused: %v", r)
		}
		assertControlAlert(t, lastRun(t, w), "alert")
	})
	t.Run("session", func(t *testing.T) {
		w := world(t)
		id := w.startSession()
		if r := w.cordon("", append([]string{"exec", id, "--"}, dialControl...)...); r.code == 0 {
			t.Fatalf("the command reached the control socket: %v", r)
		}
		w.cordon("", "session", "stop", id)
		assertControlAlert(t, lastRun(t, w), "alert")
	})
	t.Run("clean runs", func(t *testing.T) {
		w := world(t)
		// Process 1 dials from whichever thread its goroutine runs on: a few runs,
		// each of which must raise nothing.
		for i := 0; i < 3; i++ {
			if r := w.cordon("", "run", "--", "true"); r.code != 0 || strings.Contains(r.stderr, "monitor alert") {
				t.Fatalf("a run that dials nothing: %v", r)
			}
			if alerts := syscallAlerts(t, lastRun(t, w)); len(alerts) != 0 {
				t.Fatalf("process 1's own connect raised alerts: %+v", alerts)
			}
		}
	})
	t.Run("kill", func(t *testing.T) {
		w := newWorld(t)
		w.contract("version: 1\nmonitor: {mode: required, on_violation: kill, exec: [sh, socat]}\n")
		r := w.sh(strings.Join(dialControl, " ") + "; sleep 2; echo survived > after.txt")
		if r.code != 137 {
			t.Fatalf("want 137 when the monitor stops the run, got %v", r)
		}
		assertContains(t, "stderr", r.stderr, "cordon: stopped by the monitor: connect (pid ")
		assertAbsent(t, filepath.Join(w.ws, "after.txt"))
		assertControlAlert(t, lastRun(t, w), "alert")
	})
}

// TestMonitorAllowsTheGateSocket: `cordon gate NAME` is for every process of a run with
// gates; its connect to the gate socket is no deviation, even in kill mode (it was one:
// the gate's answer never came back, the run was killed).
func TestMonitorAllowsTheGateSocket(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, on_violation: kill}\n" +
		"gates:\n  - {name: release, run: [\"true\"], approve: deny, why: people cut releases}\n")
	r := w.cordon("", "run", "--", "cordon", "gate", "release")
	if r.code != 1 || !strings.Contains(r.stderr, "approve: deny") {
		t.Fatalf("want the gate's refusal (exit 1), got %v", r)
	}
	if alerts := syscallAlerts(t, lastRun(t, w)); len(alerts) != 0 {
		t.Errorf("asking a gate raised alerts: %+v", alerts)
	}
}

// TestMonitorAlertsOnProcessOnesFiles: a container's /run/cordon holds process 1's
// spec and pipes (docs/backends.md); under bwrap they do not exist. Either way a command
// opening them goes for process 1's own files and is seen (they were readable under
// /run/cordon's read-only rule: reading the spec raised nothing).
func TestMonitorAlertsOnProcessOnesFiles(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [python3]}\n")
	r := w.cordon("", "run", "--", "python3", "-c", `import os
for p, f in (("/run/cordon/spec.json", os.O_RDONLY), ("/run/cordon/env", os.O_RDONLY|os.O_NONBLOCK), ("/run/cordon/status", os.O_WRONLY|os.O_NONBLOCK)):
    try: os.close(os.open(p, f))
    except OSError as e: print(p, e)
`)
	if r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	want := map[string]string{
		"/run/cordon/spec.json": "read of a hidden path",
		"/run/cordon/env":       "read of a hidden path",
		"/run/cordon/status":    "write to a hidden path",
	}
	for _, a := range syscallAlerts(t, lastRun(t, w)) {
		if !strings.HasPrefix(a.Path, "/run/cordon/") {
			continue
		}
		if cat, ok := want[a.Path]; !ok || a.Category != cat || a.Comm != "python3" {
			t.Errorf("unexpected alert: %+v", a)
		}
		delete(want, a.Path)
	}
	for p, cat := range want {
		t.Errorf("opening %s raised no %q alert", p, cat)
	}
}

// TestRedBControlSocketSpellings: every way to spell a connect to cordon's control
// socket (through /proc/self/root, "..", "//", relative to /run/cordon, a link in the
// workspace) is refused (the listener is closed) and raises a connect alert: the exact
// spellings in the control socket's own category, the ones the path does not say in
// the general one.
func TestRedBControlSocketSpellings(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.Require(t, haveCmd("socat"), "socat is needed to dial a SOCK_SEQPACKET socket (scripts/deps.sh installs it)")
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, socat]}\n")
	control := map[string]bool{
		"/proc/self/root/run/cordon/control.sock": true,
		"/run/cordon/../cordon/control.sock":      true,
		"//run/cordon//control.sock":              true,
		"control.sock":                            false, // from /run/cordon
		w.ws + "/ctl":                             false, // a link to it
	}
	script := "ln -s /run/cordon/control.sock ctl; cd /run/cordon\n"
	for addr := range control {
		script += "socat -u OPEN:/dev/null UNIX-CONNECT:" + addr + ",type=5 2>&1 | grep -q 'Connection refused' && echo refused " + addr + "\n"
	}
	r := w.sh(script)
	for addr := range control {
		assertContains(t, "stdout", r.stdout, "refused "+addr+"\n")
	}
	got := map[string]string{}
	for _, a := range syscallAlerts(t, lastRun(t, w)) {
		if a.Rule == "connect" && a.Comm == "socat" {
			got[strings.TrimPrefix(a.Addr, "unix:")] = a.Category
		}
	}
	for addr, own := range control {
		want := "connect to another address than the egress proxy"
		if own {
			want = "connect to cordon's control socket"
		}
		if got[addr] != want {
			t.Errorf("connect to %s: alert category %q; want %q", addr, got[addr], want)
		}
	}
}
