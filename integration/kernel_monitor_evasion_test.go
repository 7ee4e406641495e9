package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

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

// Red team of the monitor's in-kernel path filter (monitor/filter.go, filtered() in
// monitor/bpf/monitor.c): a hostile command touches what the profile alerts on through
// a path the filter (or the user-space check behind it) could take for an allowed one.
// Each test runs the attack program's "opens" mode in one monitored run and asserts
// that every such access left a syscall.alert in the audit log; the kernel refusing the
// access is not enough (the monitor records intent).

type filterAlert struct{ Path, Access, Category string }

// filterWorld is a monitored workspace with a read-only directory "ro" in it.
func filterWorld(t *testing.T) *world {
	t.Helper()
	testutil.RequireRoot(t)
	w := newWorld(t)
	useBPFRoot(t, w)
	w.contract("version: 1\nmonitor: {mode: required}\nfilesystem: {deny_write: [ro]}\n")
	mustWrite(t, filepath.Join(w.ws, "ro", "f"), "read-only\n")
	mustMkdir(t, filepath.Join(w.ws, "ro", "tmp"))
	w.attacker()
	return w
}

// runOpens runs the steps (testdata/attack/filter.go) and returns the run's alerts.
func runOpens(t *testing.T, w *world, steps ...string) (string, []filterAlert) {
	t.Helper()
	r := w.cordon("", append([]string{"run", "--", "./attack", "opens"}, steps...)...)
	if r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	var alerts []filterAlert
	for _, rec := range lastRun(t, w) {
		if rec.Type != "syscall.alert" {
			continue
		}
		var a filterAlert
		if err := json.Unmarshal(rec.Body, &a); err != nil {
			t.Fatal(err)
		}
		alerts = append(alerts, a)
	}
	return r.stdout, alerts
}

// wantAlert fails unless some alert is about path (exactly, or containing it when
// path ends in "*") with that category.
func wantAlert(t *testing.T, alerts []filterAlert, out, what, path, category string) {
	t.Helper()
	for _, a := range alerts {
		match := a.Path == path
		if p, ok := strings.CutSuffix(path, "*"); ok {
			match = strings.Contains(a.Path, p)
		}
		if match && a.Category == category {
			return
		}
	}
	t.Errorf("%s: no %q alert for %s\nalerts: %+v\nattack output:\n%s", what, category, path, alerts, out)
}

// TestRedFilterProcMagicLinks: /proc/PID/root is a link to the process's root, so
// /proc/self/root/etc/shadow is /etc/shadow. The filter keeps /proc/ (read-only) and
// /proc/self/ (read-write) opens in the kernel, and user space compared the path as
// written: reads of hidden paths and writes to read-only ones through /proc/self/root,
// /proc/thread-self/root or /proc/<pid>/root raised nothing.
func TestRedFilterProcMagicLinks(t *testing.T) {
	w := filterWorld(t)
	ro := filepath.Join(w.ws, "ro")
	out, alerts := runOpens(t, w,
		"r:/proc/self/root/etc/shadow",
		"r:/proc/thread-self/root/etc/gshadow",
		"pidroot:/etc/shadow-",
		"taskroot:/etc/gshadow-",
		"w:/proc/self/root"+ro+"/x",
		"W:/proc/thread-self/root"+ro+"/f",
		"W:/proc/self/cwd/ro/f", // the cwd is the workspace: ro/f is read-only
	)
	wantAlert(t, alerts, out, "/proc/self/root", "/etc/shadow", "read of a hidden path")
	wantAlert(t, alerts, out, "/proc/thread-self/root", "/etc/gshadow", "read of a hidden path")
	wantAlert(t, alerts, out, "/proc/PID/root", "/etc/shadow-", "read of a hidden path")
	wantAlert(t, alerts, out, "/proc/self/task/TID/root", "/etc/gshadow-", "read of a hidden path")
	wantAlert(t, alerts, out, "/proc/self/root write", ro+"/x", "write to a read-only path")
	wantAlert(t, alerts, out, "/proc/thread-self/root O_RDWR", ro+"/f", "write to a read-only path")
	wantAlert(t, alerts, out, "/proc/self/cwd O_RDWR", "/proc/self/cwd/ro/f", "a path through /proc the monitor cannot follow")
}

// TestRedFilterHolds: what the filter gets right, through the real binary. Every one
// of these reaches user space and alerts: prefix confusion, unclean paths, paths at
// the key-size edges, relative paths (cwd and dirfd), access modes the rule does not
// allow, hard links, openat2 (refused by seccomp; would be sent).
func TestRedFilterHolds(t *testing.T) {
	w := filterWorld(t)
	ro := filepath.Join(w.ws, "ro")
	sib := "/tmp-evil" // outside every rule, sharing the bytes of /tmp (rw)
	esc := func(n int) string {
		// a path of n bytes below the workspace that climbs out to /etc/shadow
		tail := "/../../../../../../../../etc/shadow"
		pad := n - len(w.ws) - len(tail) - 1
		return w.ws + "/" + strings.Repeat("a", pad) + tail
	}
	steps := []string{
		"r:" + sib + "/x",
		"w:" + sib + "/x",
		"r:" + w.ws + "//../../../../../etc/gshadow",
		"r:/etc/./shadow-",
		"r:/etc/ssl/private/",
		"r:" + esc(254), "r:" + esc(255), "r:" + esc(256), "r:" + esc(4096),
		"W:" + ro + "/f",
		"w:" + ro + "/f",
		"w:" + ro + "/new",
		"cd:" + ro, "w:rel",
		"dir:/etc", "r:security/opasswd",
		"hl:/etc/passwd:" + filepath.Join(w.ws, "pw"),
		"inroot:" + ro + ":/tmp/x",
	}
	out, alerts := runOpens(t, w, steps...)
	wantAlert(t, alerts, out, "sibling read", sib+"/x", "read outside the readable set")
	wantAlert(t, alerts, out, "sibling write", sib+"/x", "write outside the writable set")
	wantAlert(t, alerts, out, "'//' and '..'", "/etc/gshadow", "read of a hidden path")
	wantAlert(t, alerts, out, "'/./'", "/etc/shadow-", "read of a hidden path")
	wantAlert(t, alerts, out, "trailing '/'", "/etc/ssl/private", "read of a hidden path")
	wantAlert(t, alerts, out, "254..256 bytes, '..'", "/etc/shadow", "read of a hidden path")
	wantAlert(t, alerts, out, "4096 bytes", w.ws+"/aaaa*", "a call the monitor could not read")
	wantAlert(t, alerts, out, "O_RDWR on ro", ro+"/f", "write to a read-only path")
	wantAlert(t, alerts, out, "O_CREAT new on ro", ro+"/new", "write to a read-only path")
	wantAlert(t, alerts, out, "relative to cwd", ro+"/rel", "write to a read-only path")
	wantAlert(t, alerts, out, "relative to dirfd", "/etc/security/opasswd", "read of a hidden path")
	if !strings.Contains(out, "hl:/etc/passwd:"+filepath.Join(w.ws, "pw")+" denied") {
		t.Errorf("a hard link from /etc into the workspace was made:\n%s", out)
	}
	if !strings.Contains(out, "inroot:"+ro+":/tmp/x denied: function not implemented") {
		// openat2 runs: RESOLVE_IN_ROOT makes "/tmp/x" ro/tmp/x, which the monitor
		// (reading the path as absolute) would take for the tmpfs.
		wantAlert(t, alerts, out, "openat2 RESOLVE_IN_ROOT", ro+"/tmp/x", "write to a read-only path")
	}
}
