package integration

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/paths"
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
