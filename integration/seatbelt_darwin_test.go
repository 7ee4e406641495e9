package integration

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

// The seatbelt backend end to end, on macOS only (deploy/github/seatbelt.yml runs them
// with -run '^TestSeatbelt'): the real cordon binary, sandbox-exec, the egress proxy on
// its loopback port. They were written on Linux and checked by reading and by
// cross-compiling; docs/backends.md says what has been seen to run.

// newMacWorld is a world for --backend seatbelt: a workspace that is a git repository,
// a home with a key in it, no bwrap needed.
func newMacWorld(t *testing.T) *world {
	t.Helper()
	if _, err := os.Stat("/usr/bin/sandbox-exec"); err != nil {
		t.Fatalf("macOS without sandbox-exec: %v", err)
	}
	root := t.TempDir()
	w := &world{t: t, ws: filepath.Join(root, "ws"), home: filepath.Join(root, "home")}
	mustMkdir(t, filepath.Join(w.ws, ".git", "hooks"))
	mustWrite(t, filepath.Join(w.ws, ".git", "HEAD"), "ref: refs/heads/main\n")
	mustWrite(t, filepath.Join(w.ws, "src", "a.txt"), "a\n")
	mustWrite(t, filepath.Join(w.home, ".ssh", "id_rsa"), "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-material\n")
	w.runRoot = shortTempDir(t)
	w.env = []string{
		"PATH=/usr/bin:/bin:/usr/sbin:/sbin", "HOME=" + w.home, "LANG=C.UTF-8",
		"CORDON_BACKEND=seatbelt", paths.RunRootEnv + "=" + w.runRoot,
	}
	return w
}

// macContract allows the workspace and egress to one loopback port.
func (w *world) macContract(port int) {
	w.contract(fmt.Sprintf(`version: 1
filesystem:
  writable: ["."]
network:
  allow:
    - {cidr: 127.0.0.1/32, ports: [%d], why: the test's server}
`, port))
}

// TestSeatbeltAttacks: the bwrap suite's attacks that apply on macOS, each refused by
// the kernel (the command fails), next to what the contract allows (it succeeds).
func TestSeatbeltAttacks(t *testing.T) {
	w := newMacWorld(t)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprintln(rw, "hello") }))
	defer srv.Close()
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	w.macContract(srv.Listener.Addr().(*net.TCPAddr).Port)
	curl := "curl -s -o /dev/null -w '%{http_code}' --max-time 20 "
	for _, c := range []struct {
		name, script string
		ok           bool
		out          string // a part of stdout, when set
	}{
		{"write the workspace", "echo x > src/b.txt", true, ""},
		{"write .git/hooks", "echo x > .git/hooks/pre-commit", false, ""},
		{"read ~/.ssh", "cat " + w.home + "/.ssh/id_rsa", false, ""},
		{"connect 1.2.3.4:443 directly", "nc -z -G 5 1.2.3.4 443", false, ""},
		{"connect the allowed server directly", "nc -z -G 5 127.0.0.1 " + listenerPort(srv.Listener), false, ""},
		{"the allowed server through the proxy", curl + srv.URL + "/", true, "200"},
		{"another port through the proxy", curl + "http://" + other.Addr().String() + "/", true, "403"},
		{"the proxy without its token", "curl -s -o /dev/null -w '%{http_code}' --max-time 20 --proxy \"http://${HTTP_PROXY##*@}\" " + srv.URL + "/", true, "407"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := w.sh(c.script)
			if (r.code == 0) != c.ok || !strings.Contains(r.stdout, c.out) {
				t.Errorf("%s: %s; want success=%v and %q in stdout", c.script, r, c.ok, c.out)
			}
		})
	}
}

func listenerPort(l net.Listener) string { return strconv.Itoa(l.Addr().(*net.TCPAddr).Port) }

// TestSeatbeltKilledCordon: a cordon that is SIGKILLed takes the sandbox's process
// group with it (the group watcher; macOS has no PDEATHSIG).
func TestSeatbeltKilledCordon(t *testing.T) {
	w := newMacWorld(t)
	w.macContract(9) // any port: the command makes no connection
	const marker = "sleep 3217"
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", marker+" & echo started > src/started; wait")
	cmd.Dir, cmd.Env = w.ws, w.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	started := filepath.Join(w.ws, "src", "started")
	waitFor(t, 30*time.Second, "the command to start", func() bool { _, err := os.Stat(started); return err == nil })
	if !running(marker) {
		t.Fatal("the sandboxed sleep is not running")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitFor(t, 30*time.Second, "the sandbox's sleep to die with the killed cordon", func() bool { return !running(marker) })
}

// running reports whether a process whose command line is cmdline exists.
func running(cmdline string) bool {
	return exec.Command("pgrep", "-f", "^"+cmdline+"$").Run() == nil
}

// TestSeatbeltSession: a session on seatbelt keeps its files and its background
// processes from one exec to the next, and its stop leaves nothing: not the background
// sleep (killed with its command's process group by process 1 when the runner hangs
// up), not the supervisor's socket, record or log.
func TestSeatbeltSession(t *testing.T) {
	w := newMacWorld(t)
	w.macContract(9) // any port: the commands make no connection
	const marker = "sleep 3218"
	id := w.startSession()
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo one > src/state.txt; "+marker+" > /dev/null 2>&1 &"); r.code != 0 {
		t.Fatalf("exec 1: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "cat src/state.txt; exit 3"); r.code != 3 || r.stdout != "one\n" {
		t.Fatalf("exec 2: want exit 3 and the first command's file: %v", r)
	}
	if !running(marker) {
		t.Fatal("the first command's background sleep did not outlive it")
	}
	if r := w.cordon("", "exec", id, "--", "cat", filepath.Join(w.home, ".ssh", "id_rsa")); r.code == 0 || strings.Contains(r.stdout, "secret-key-material") {
		t.Fatalf("a session's command read the host's key: %v", r)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	waitFor(t, 30*time.Second, "the background sleep to die with the session", func() bool { return !running(marker) })
	for _, ext := range []string{".sock", ".json", ".log"} {
		assertAbsent(t, filepath.Join(w.sessionsDir(), id+ext))
	}
	if r := w.cordon("", "audit", "verify", id); r.code != 0 {
		t.Fatalf("audit verify: %v", r)
	}
}
