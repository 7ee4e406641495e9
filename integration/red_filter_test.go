package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

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
