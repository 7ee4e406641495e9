package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestProcessOneOutOfReach: no command can ptrace process 1, open its descriptors
// (the control socket, a command's cgroup directory), read its memory or environment.
func TestProcessOneOutOfReach(t *testing.T) {
	w := newWorld(t)
	out := w.attack("pid1")
	for _, want := range []string{"ptrace-seize 1 denied", "ptrace-attach 1 denied", "read /proc/1/environ denied", "open /proc/1/mem denied", "pidfd_getfd 1 denied"} {
		assertContains(t, "process 1", out, want)
	}
	if os.Getenv("CORDON_BACKEND") == "" {
		assertContains(t, "process 1's descriptors", out, "list /proc/1/fd denied")
	}
	// The control: a debugger of the command's own children keeps working.
	r := w.cordon("", "run", "--", "./attack", "trace-child")
	assertContains(t, "ptrace of an own child", r.stdout, "traced child: stopped under ptrace")
}

// TestSessionProcessOneCannotBeTakenOver: in a session, a command that signals, ptraces
// or reaches for process 1's descriptors changes nothing: the next exec runs and its
// result is its own.
func TestSessionProcessOneCannotBeTakenOver(t *testing.T) {
	w := newWorld(t)
	w.attacker()
	id := w.startSession()
	r := w.cordon("", "exec", id, "--", "./attack", "signals")
	assertContains(t, "process 1 ignores signals", r.stdout, "pid1 alive")
	r = w.cordon("", "exec", id, "--", "./attack", "pid1")
	if r.code != 0 {
		t.Fatalf("attack pid1: %v", r)
	}
	assertRefused(t, "pid1", r.stdout)
	r = w.cordon("", "exec", id, "--", "sh", "-c", "echo REAL; exit 3")
	if r.code != 3 || r.stdout != "REAL\n" {
		t.Fatalf("the exec after the attacks was not the real one: %v", r)
	}
	if s := w.cordon("", "session", "stop", id); s.code != 0 {
		t.Fatalf("stop: %v", s)
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 {
		t.Fatalf("verify: %v", v)
	}
}

// TestSessionControlChannelIsClosedToTheSandbox: process 1 took the control socket
// before any command existed and the host stopped listening, so a command cannot dial
// it to pose as process 1; the host's session and gate admin sockets are not in the
// sandbox at all.
func TestSessionControlChannelIsClosedToTheSandbox(t *testing.T) {
	w := newWorld(t)
	testutil.Require(t, haveCmd("socat"), "socat is needed to dial a SOCK_SEQPACKET socket (scripts/deps.sh installs it)")
	id := w.startSession()
	r := w.cordon("", "exec", id, "--", "socat", "-u", "OPEN:/dev/null", "UNIX-CONNECT:/run/cordon/control.sock,type=5")
	if r.code == 0 || !strings.Contains(r.stderr, "Connection refused") {
		t.Errorf("a command dialled the control socket: %v", r)
	}
	for _, p := range []string{paths.Root(w.runRoot).SessionSocket(id), w.gateAdminDir()} {
		if r := w.cordon("", "exec", id, "--", "test", "-e", p); r.code != 1 {
			t.Errorf("%s is visible in the sandbox: %v", p, r)
		}
	}
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 0 {
		t.Errorf("the session stopped working: %v", r)
	}
}

// TestStdioIsNotAHostFile: a command's standard descriptors are pipes (or /dev/null),
// never the file cordon's own output goes to, and it inherits nothing else.
func TestStdioIsNotAHostFile(t *testing.T) {
	w := newWorld(t)
	w.attacker()
	in := filepath.Join(t.TempDir(), "stdin.txt")
	mustWrite(t, in, "host file\n")
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "./attack", "stdio")
	cmd.Dir, cmd.Env, cmd.Stdin = w.ws, w.env, f
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(string(out), "stdin.txt") {
		t.Errorf("the host file cordon's stdin is reached the sandbox: %s", out)
	}
	assertContains(t, "stdin", string(out), "fd0 pipe:")
	// A shell opens nothing of its own: its descriptors are what it was given. ls
	// runs in a subshell, a process of its own, so that the directory it opens to
	// list is never the shell's: busybox's sh runs an applet such as ls in its own
	// process ("ls /proc/$$/fd" would show ls's descriptor 3 as the shell's), and a
	// subshell that is a script's last command too (the shell need not outlive it).
	// No pipeline: the shell's own ends of a pipe would show while ls reads the
	// directory.
	r := w.sh("(ls /proc/$$/fd); echo listed")
	if strings.Join(strings.Fields(r.stdout), " ") != "0 1 2 listed" {
		t.Errorf("the command inherited descriptors beyond stdio: %v", r)
	}
}

// TestHostWatchCannotBeHeld: on the container backends process 1 learns that cordon
// died when the host's end of the status FIFO closes; a command holding a read end of
// its own would keep the container running for ever after a kill -9. No command can
// open the files protocol's entries.
func TestHostWatchCannotBeHeld(t *testing.T) {
	w := newWorld(t)
	r := w.sh("for f in status env spec.json; do (exec 5</run/cordon/$f) 2>/dev/null && echo held $f || echo refused $f; done; ls /run/cordon >/dev/null && echo listed")
	for _, f := range []string{"status", "env", "spec.json"} {
		assertContains(t, "files protocol", r.stdout, "refused "+f)
	}
	assertContains(t, "/run/cordon stays listable", r.stdout, "listed")
}

// TestColdHostileMountPointNames: writable directories whose names hold what a
// mountinfo line is made of reach process 1's parser intact: the run starts (each
// grant matched its unescaped point), and the table parses to those paths and not to
// the mount a name spells. The names: a newline, then a whole line claiming a read-only procfs at
// /proc/sys; spaces and " - proc "; and the white space the kernel does not escape
// (\r, \v, \f, U+0085, U+00A0), at which a split into fields read a mount's options
// out of its path ("x,ro": a read-write mount passed as read-only) and refused every
// run that showed such a directory.
func TestColdHostileMountPointNames(t *testing.T) {
	t.Run("bwrap", hostileMountPointNames)
	t.Run("engines", func(t *testing.T) {
		forEachContainerBackend(t, func(t *testing.T, _ string) { hostileMountPointNames(t) })
	})
}

func hostileMountPointNames(t *testing.T) {
	w := newWorld(t)
	root := shortTempDir(t)
	hostile := []string{filepath.Join(root, "a\n999999 1 0:3 ", " ", "proc", "sys ro - proc proc ro\nb - proc x")}
	for i, sp := range []string{"\r", "\v", "\f", "\u0085", "\u00a0"} {
		hostile = append(hostile, filepath.Join(root, strconv.Itoa(i)+"p"+sp+"q"+sp+"x,ro"))
	}
	grants, script := `"."`, "cat /proc/self/mountinfo > mi"
	for _, h := range hostile {
		mustMkdir(t, h)
		grants += ", " + strconv.Quote(h)
		script += "; echo x > " + shellQuote(filepath.Join(h, "f"))
	}
	w.contract("version: 1\nfilesystem:\n  writable: [" + grants + "]\n")
	r := w.sh(script)
	if r.code != 0 {
		t.Fatalf("the run was refused: %v", r)
	}
	data, err := os.ReadFile(filepath.Join(w.ws, "mi"))
	if err != nil {
		t.Fatal(err)
	}
	points := map[string]linux.MountInfo{}
	for _, m := range linux.ParseMountinfo(string(data)) {
		points[m.Point] = m
	}
	for _, h := range hostile {
		if m, ok := points[h]; !ok || m.ReadOnly() {
			t.Errorf("%q did not parse back to itself, read-write (%+v):\n%s", h, m, data)
		}
	}
	for _, m := range points {
		if m.ID == 999999 {
			t.Fatalf("a directory's name parsed as a mount of its own (%+v):\n%s", m, data)
		}
	}
}
