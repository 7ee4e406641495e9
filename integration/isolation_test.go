package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKernelInterfacesNotWritable: the sandbox, even started by root, is not host
// root: the machine-wide sysctls (core_pattern ran a workspace script as host root
// once), sysrq and uevent_helper refuse it — for permission, not by chance.
func TestKernelInterfacesNotWritable(t *testing.T) {
	w := newWorld(t)
	out := w.attack("sysctl")
	assertContains(t, "core_pattern refused", out, "write /proc/sys/kernel/core_pattern denied: open /proc/sys/kernel/core_pattern: ")
	if strings.Contains(out, "core_pattern denied: open /proc/sys/kernel/core_pattern: no such file") {
		t.Errorf("core_pattern must exist (and refuse), not be missing: %s", out)
	}
	r := w.sh("id -u; cat /proc/sys/kernel/core_pattern >/dev/null && echo readable")
	assertContains(t, "sysctls stay readable", r.stdout, "readable")
	if os.Geteuid() == 0 && strings.HasPrefix(r.stdout, "0\n") && os.Getenv("CORDON_BACKEND") == "" {
		t.Errorf("a bwrap sandbox started by root runs as uid 0: %v", r)
	}
}

// TestSeccompRefusesWhatAgentsNeverNeed: the second kernel layer, on every backend.
func TestSeccompRefusesWhatAgentsNeverNeed(t *testing.T) {
	w := newWorld(t)
	out := w.attack("seccomp")
	for _, want := range []string{"keyctl denied: operation not permitted", "bpf denied: operation not permitted",
		"unshare-user denied: operation not permitted", "perf_event_open denied: operation not permitted",
		"userfaultfd denied: operation not permitted", "io_uring_setup denied: operation not permitted",
		"clone3-newuser denied", "socket-vsock denied: operation not permitted",
		"mount denied: operation not permitted"} {
		assertContains(t, "seccomp", out, want)
	}
	r := w.sh("grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status")
	assertContains(t, "filter mode", r.stdout, "Seccomp:\t2")
}

// TestNoCgroupReachable: no cgroup file is writable from inside, so no command can
// kill a host cgroup or move itself out of its own.
func TestNoCgroupReachable(t *testing.T) {
	w := newWorld(t)
	out := w.attack("cgroup")
	assertContains(t, "walked", out, "cgroup done")
}

// TestNoSetIDFilesPlanted: a file the sandbox writes is its owner's on the host (with
// bwrap started by root, host root's, through the idmapped workspace), so a
// set-user-ID or set-group-ID bit on it would be a setuid program planted for the
// host to run. The filter refuses the bit on every call that sets a mode.
func TestNoSetIDFilesPlanted(t *testing.T) {
	w := newWorld(t)
	r := w.sh("cp /bin/sh ./suid; chmod 4755 ./suid; echo chmod=$?; chmod g+s ./suid; echo chmodg=$?; mkdir -m 2775 d; echo mkdir=$?; chmod 755 ./suid; echo plain=$?")
	for _, want := range []string{"chmod=1", "chmodg=1", "mkdir=1", "plain=0"} {
		assertContains(t, "set-id bits refused", r.stdout, want)
	}
	fi, err := os.Stat(filepath.Join(w.ws, "suid"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Fatalf("the sandbox planted a set-id file on the host: %v", fi.Mode())
	}
}

// TestCheckJudgesTheRunPlan: check, explain and run compile one plan with the same
// inputs, so a contract run refuses (it grants the audit root, a protected path) is
// one check rejects, for the same reason.
func TestCheckJudgesTheRunPlan(t *testing.T) {
	w := newWorld(t)
	audit := filepath.Join(w.home, "audit")
	mustMkdir(t, audit)
	w.env = append(w.env, "CORDON_AUDIT_DIR="+audit)
	w.contract("version: 1\nfilesystem:\n  readable: [\"@system\", " + strconv.Quote(audit) + "]\n")
	c := w.cordon("", "check")
	r := w.cordon("", "run", "--", "true")
	e := w.cordon("", "explain")
	if c.code != 1 || r.code != 125 || e.code == 0 {
		t.Fatalf("check %d, run %d, explain %d; want 1, 125, refused:\ncheck: %v\nrun: %v", c.code, r.code, e.code, c, r)
	}
	if !strings.Contains(c.stdout, audit) || !strings.Contains(r.stderr, audit) {
		t.Fatalf("check and run must name the same reason:\ncheck: %v\nrun: %v", c, r)
	}
}

// TestSessionLogHasNoGaps: a change no command's diff holds — a background process
// of an earlier exec writing between two execs — is still in the log, as an fs.diff
// marked between commands.
func TestSessionLogHasNoGaps(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "(sleep 0.3; echo sneaky > auth.py) >/dev/null 2>&1 &"); r.code != 0 {
		t.Fatal(r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(w.ws, "auth.py")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 0 {
		t.Fatal(r)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatal(r)
	}
	found := false
	for _, ev := range sessionEvents(t, w, id) {
		if string(ev.Type) == "fs.diff" && strings.Contains(string(ev.Body), `"between_commands":true`) && strings.Contains(string(ev.Body), "auth.py") {
			found = true
		}
	}
	if !found {
		t.Fatal("the change made between commands is not in the log")
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 {
		t.Fatalf("verify: %v", v)
	}
	show := w.cordon("", "audit", "show", id)
	if show.code != 0 || !strings.Contains(show.stdout, "auth.py") || !strings.Contains(show.stdout, "between commands") {
		t.Fatalf("audit show must show the change between commands: %v", show)
	}
}
