package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Red team B, session 13: the control socket, process 1 unwatched on every thread, and
// the long-lived shared monitor.

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

// TestRedBNoPidNamespaceOfItsOwn: the kernel takes every thread of a process that is
// process 1 of its pid namespace for cordon's init, unwatched. A command that could
// make a pid namespace of its own (clone3, whose flags seccomp cannot see) would run
// unwatched as its process 1; bwrap's --disable-userns and the dropped capabilities
// refuse both ways in.
func TestRedBNoPidNamespaceOfItsOwn(t *testing.T) {
	w := newWorld(t)
	out := w.attack("pidns")
	for _, name := range []string{"clone3-newpid", "clone3-newuser-newpid"} {
		assertContains(t, "pidns", out, name+" denied: ")
		if strings.Contains(out, name+" ok") {
			t.Errorf("%s: a command made a pid namespace of its own:\n%s", name, out)
		}
	}
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
	// The same link through another process's cwd, a path read-only by its text.
	w.attacker()
	r = w.cordon("", "run", "--", "./attack", "exec-via-cwd", "node", "-c", "print('python ran as node')")
	if r.code != 0 || !strings.Contains(r.stdout, "python ran as node") {
		t.Fatalf("run: %v", r)
	}
	alerts = execAlerts(syscallAlerts(t, lastRun(t, w)))
	if len(alerts) != 1 || !strings.Contains(alerts[0].Reason, `interpreter "python3`) {
		t.Fatalf("exec alerts = %+v; want one for python3 run as node through /proc/PID/cwd", alerts)
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

// TestRedBGCKeepsALiveRun: a cordon killed with SIGKILL leaves its registration with
// the shared programs; `cordon gc`, run while another monitored run is on, removes
// that one registration only: the live run keeps its programs and its ring buffer, and
// its next deviation is still in its log.
func TestRedBGCKeepsALiveRun(t *testing.T) {
	testutil.RequireRoot(t)
	dead, live := newWorld(t), newWorld(t)
	root := useBPFRoot(t, live, dead)
	for _, w := range []*world{dead, live} {
		w.contract("version: 1\nmonitor: {mode: required, exec: [sh, sleep, cat]}\n")
	}
	start := func(w *world, script string) *exec.Cmd {
		cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", script)
		cmd.Dir, cmd.Env = w.ws, w.env
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		waitFor(t, 20*time.Second, "the run to start", func() bool { return fileExists(filepath.Join(w.ws, "up.txt")) })
		return cmd
	}
	lv := start(live, "echo up > up.txt; while [ ! -e go.txt ]; do sleep 0.05; done; cat /etc/shadow; true")
	dc := start(dead, "echo up > up.txt; exec sleep 600")
	_ = dc.Process.Kill()
	_ = dc.Wait()
	r := dead.cordon("", "gc")
	if r.code != 0 {
		t.Fatalf("gc: %v", r)
	}
	if n := strings.Count(r.stdout, "removed the monitor's registration of cgroup "); n != 1 {
		t.Errorf("gc removed %d registrations; want the killed run's only:\n%s", n, r.stdout)
	}
	if strings.Contains(r.stdout, "removed the monitor's programs") || len(pinsIn(root)) == 0 {
		t.Fatalf("gc removed the programs a live run uses:\n%s", r.stdout)
	}
	mustWrite(t, filepath.Join(live.ws, "go.txt"), "go\n")
	if err := lv.Wait(); err != nil {
		t.Fatalf("the live run: %v", err)
	}
	seen := false
	for _, a := range syscallAlerts(t, lastRun(t, live)) {
		seen = seen || (a.Path == "/etc/shadow" && a.Comm == "cat")
	}
	if !seen {
		t.Errorf("the live run's read of /etc/shadow after gc raised no alert")
	}
	if r := live.cordon("", "audit", "verify", "last"); r.code != 0 {
		t.Errorf("audit verify: %v", r)
	}
}

// lostOnStderr is the count of `cordon: warning: the monitor lost N events`, or "".
var lostOnStderr = regexp.MustCompile(`the monitor lost (\d+) events`)

// TestRedBFloodLogsTheTotalLost: a workload that floods its ring buffer (8 threads
// opening a 4000-byte path outside the profile) makes the kernel drop events. The log
// said how many when the loss was first seen (683 of 18,359 lost); it now also says
// the total, the count cordon prints at the end.
func TestRedBFloodLogsTheTotalLost(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required}\n")
	w.attacker()
	var total string
	for _, n := range []string{"20000", "80000"} {
		r := w.cordon("", "run", "--", "./attack", "flood", "8", n)
		if r.code != 0 || !strings.Contains(r.stdout, "flood done") {
			t.Fatalf("flood: %v", r)
		}
		if m := lostOnStderr.FindStringSubmatch(r.stderr); m != nil {
			total = m[1]
			break
		}
	}
	if total == "" {
		t.Fatal("two floods lost no event: the test proves nothing")
	}
	var reasons []string
	for _, a := range syscallAlerts(t, lastRun(t, w)) {
		if a.Category == "deviations the monitor could not log" {
			reasons = append(reasons, a.Reason)
		}
	}
	last := ""
	if len(reasons) > 0 {
		last = reasons[len(reasons)-1]
	}
	if !strings.Contains(last, ": "+total+" events were lost") {
		t.Errorf("cordon says %s events were lost; the log's gap alerts say %q", total, reasons)
	}
}
