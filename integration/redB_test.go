package integration

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Red team B, session 13: what the monitor's exec check let through.

// execAlerts are the log's alerts for execs of risky programs.
func execAlerts(alerts []event.SyscallAlertBody) []event.SyscallAlertBody {
	var out []event.SyscallAlertBody
	for _, a := range alerts {
		if a.Rule == "exec" {
			out = append(out, a)
		}
	}
	return out
}

// loaderPath is the dynamic loader of this machine's arch, or "".
func loaderPath() string {
	name := map[string]string{"amd64": "/lib64/ld-linux-x86-64.so.2", "arm64": "/lib/ld-linux-aarch64.so.1"}[runtime.GOARCH]
	if _, err := os.Stat(name); err != nil {
		return ""
	}
	return name
}

// TestRedBExecThroughTheDynamicLoader: `ld.so /usr/bin/python3` runs python with no
// exec of python (the loader maps it), so the exec check, which reads the executed
// file's names, saw only the loader, no risky program, and raised nothing. The loader
// is now a risky program of its own kind.
func TestRedBExecThroughTheDynamicLoader(t *testing.T) {
	testutil.RequireRoot(t)
	ld := loaderPath()
	testutil.Require(t, ld != "", "no dynamic loader at the arch's usual path")
	testutil.Require(t, fileExists("/usr/bin/python3"), "python3 is needed in /usr/bin")
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required}\n")
	r := w.cordon("", "run", "--", ld, "/usr/bin/python3", "-c", "print('python ran')")
	if r.code != 0 || !strings.Contains(r.stdout, "python ran") {
		t.Fatalf("run: %v", r)
	}
	alerts := execAlerts(syscallAlerts(t, lastRun(t, w)))
	if len(alerts) != 1 || alerts[0].Category != "exec of a shell, interpreter or relay absent from monitor.exec" ||
		!strings.Contains(alerts[0].Reason, `dynamic loader "ld-linux-`) {
		t.Fatalf("exec alerts = %+v; want one for the dynamic loader", alerts)
	}
	assertContains(t, "stderr", r.stderr, "cordon: monitor alert: exec of a shell, interpreter or relay absent from monitor.exec: ")
}

// TestRedBLinkNamedAfterAnAllowedProgram: with monitor.exec: [node], a link the
// workload makes in its workspace, named node, to python3 ran python unseen: the base
// name allowed was matched against the name the program was run by. A name given by a
// link the workload could have made allows only another version of the same program
// (a virtualenv's python3 -> python3.11, the control).
func TestRedBLinkNamedAfterAnAllowedProgram(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.Require(t, fileExists("/usr/bin/python3"), "python3 is needed in /usr/bin")
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [node]}\n")
	// The workload makes the link itself (ln is no risky program).
	if r := w.cordon("", "run", "--", "ln", "-s", "/usr/bin/python3", "node"); r.code != 0 {
		t.Fatalf("ln: %v", r)
	}
	r := w.cordon("", "run", "--", "./node", "-c", "print('python ran as node')")
	if r.code != 0 || !strings.Contains(r.stdout, "python ran as node") {
		t.Fatalf("run: %v", r)
	}
	alerts := execAlerts(syscallAlerts(t, lastRun(t, w)))
	if len(alerts) != 1 || !strings.Contains(alerts[0].Reason, `interpreter "python3`) {
		t.Fatalf("exec alerts = %+v; want one for python3 run as node", alerts)
	}
	// The control: a virtualenv's python3, a link in the workspace to the same program.
	w.contract("version: 1\nmonitor: {mode: required, exec: [python3]}\n")
	mustMkdir(t, filepath.Join(w.ws, ".venv", "bin"))
	if err := os.Symlink("/usr/bin/python3", filepath.Join(w.ws, ".venv", "bin", "python3")); err != nil {
		t.Fatal(err)
	}
	r = w.cordon("", "run", "--", filepath.Join(w.ws, ".venv", "bin", "python3"), "-c", "print('venv')")
	if r.code != 0 || !strings.Contains(r.stdout, "venv") {
		t.Fatalf("venv run: %v", r)
	}
	if alerts := execAlerts(syscallAlerts(t, lastRun(t, w))); len(alerts) != 0 {
		t.Errorf("a virtualenv's python3, allowed as python3, raised %+v", alerts)
	}
}

