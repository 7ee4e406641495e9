package integration

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

func TestNoBwrapRefuses(t *testing.T) {
	w := newWorld(t)
	w.env[0] = "PATH=" + t.TempDir() // no bwrap on PATH
	r := w.sh("echo ran > ran.txt")
	if r.code != 125 {
		t.Fatalf("want 125 without bwrap, got %v", r)
	}
	assertContains(t, "stderr", r.stderr, "Bubblewrap is not installed")
	assertContains(t, "stderr", r.stderr, "refusing to run unsandboxed")
	assertAbsent(t, filepath.Join(w.ws, "ran.txt"))
}

// TestEnginesMissingRefuses: the cordon of `make build` links no engine client and
// hands container work to cordon-engines beside it; alone, it refuses (125, naming
// what is missing) rather than falling back to another backend.
func TestEnginesMissingRefuses(t *testing.T) {
	w := newWorld(t)
	alone := filepath.Join(t.TempDir(), "cordon")
	data, err := os.ReadFile(testutil.Cordon(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"docker", "containerd"} {
		cmd := exec.Command(alone, "run", "--backend", b, "--", "sh", "-c", "echo ran > ran.txt")
		cmd.Dir, cmd.Env = w.ws, w.env
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 125 || !strings.Contains(string(out), "cordon-engines is not beside it") {
			t.Errorf("--backend %s without cordon-engines: want 125 naming it, got %v: %s", b, err, out)
		}
	}
	assertAbsent(t, filepath.Join(w.ws, "ran.txt"))
}

func TestContainerEngineUnreachable(t *testing.T) {
	requireEngines(t)
	for _, c := range []struct{ backend, env, want string }{
		{"docker", "DOCKER_HOST=unix:///nonexistent/docker.sock", "docker: the engine at unix:///nonexistent/docker.sock does not answer"},
		{"containerd", "CONTAINERD_ADDRESS=/nonexistent/containerd.sock", "containerd: /nonexistent/containerd.sock does not answer"},
	} {
		t.Run(c.backend, func(t *testing.T) {
			w := newWorld(t)
			w.env = append(w.env, c.env)
			r := w.cordon("", "run", "--backend", c.backend, "--", "sh", "-c", "echo ran > ran.txt")
			if r.code != 125 {
				t.Fatalf("want 125, got %v", r)
			}
			assertContains(t, "stderr", r.stderr, c.want)
			assertContains(t, "stderr", r.stderr, "refusing to run unsandboxed")
			assertAbsent(t, filepath.Join(w.ws, "ran.txt"))
		})
	}
}

func TestContainerAuto(t *testing.T) {
	image := requireEngines(t)
	w := newWorld(t)
	w.env[0] = "PATH=" + t.TempDir() // bwrap is not usable
	r := w.cordon("", "backends")
	assertContains(t, "backends", r.stdout, "auto uses it only when bwrap is unusable and the contract names an image")
	r = w.sh("true")
	if r.code != 125 {
		t.Fatalf("no image, no bwrap: want 125, got %v", r)
	}
	assertContains(t, "stderr", r.stderr, "docker: --backend auto uses it only for a contract that names an image")
	w.imageContract(image, "")
	r = w.cordon("", "backends")
	if !regexp.MustCompile(`(?m)^docker +available +ready: Docker .*; chosen by --backend auto$`).MatchString(r.stdout) {
		t.Errorf("backends with an image contract: %v", r)
	}
	r = w.cordon("", "run", "-v", "--", "/bin/busybox", "true")
	if r.code != 0 {
		t.Fatalf("auto with an image: %v", r)
	}
	assertContains(t, "stderr", r.stderr, "backend=docker")
	r = w.cordon("", "explain", "--backend", "containerd")
	assertContains(t, "explain", r.stdout, "The workspace "+w.ws+" is bind-mounted read-write at the same path")
	assertContains(t, "explain", r.stdout, "Root file system: the image "+image)
	assertNoLeftovers(t, "docker")
}

// imageContract writes a contract naming the test image, with extra YAML.
func (w *world) imageContract(image, extra string) {
	w.contract("version: 1\nimage: " + image + "\n" + extra)
}

func TestContainerImage(t *testing.T) {
	image := requireEngines(t)
	forEachContainerBackend(t, func(t *testing.T, backend string) {
		w := newWorld(t)
		// A workspace that belongs to an ordinary user: the command runs as that user.
		extra := filepath.Join(filepath.Dir(w.ws), "extra")
		mustWrite(t, filepath.Join(extra, "data.txt"), "extra data\n")
		mustWrite(t, filepath.Join(w.ws, ".env"), "DB_PASSWORD=hunter2\n")
		mustMkdir(t, filepath.Join(w.ws, ".git"))
		for _, p := range []string{w.ws, filepath.Join(w.ws, ".env"), filepath.Join(w.ws, ".git")} {
			if err := os.Chown(p, 1000, 1000); err != nil {
				t.Fatal(err)
			}
		}
		w.imageContract(image, "filesystem:\n  readable: ["+extra+"]\n  deny_read: [.env]\n")
		r := w.sh(`id -u; id -g; echo made > out.txt; pwd
cat /proc/1/cmdline | tr '\000' ' '; echo
cat ` + extra + `/data.txt; echo x > ` + extra + `/new
touch /pwned; echo x > .git/x; cat .env
touch /tmp/t && echo tmp-ok; touch "$HOME/h" && echo home-ok
ls /usr; echo interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1)`)
		out := strings.Fields(r.stdout)
		if len(out) < 2 || out[0] != "1000" || out[1] != "1000" {
			t.Fatalf("want the command to run as the workspace owner 1000:1000, got %v", r)
		}
		assertContains(t, "stdout", r.stdout, w.ws+"\n")                          // workspace at the same path
		assertContains(t, "stdout", r.stdout, "/run/cordon/cordon internal init") // cordon's pid1
		assertContains(t, "stdout", r.stdout, "extra data")
		assertContains(t, "stdout", r.stdout, "tmp-ok")
		assertContains(t, "stdout", r.stdout, "home-ok")
		assertContains(t, "stderr", r.stderr, "can't create "+extra+"/new: Read-only file system")
		assertContains(t, "stderr", r.stderr, "touch: /pwned: Read-only file system")
		assertContains(t, "stderr", r.stderr, "can't create .git/x: Read-only file system")
		assertContains(t, "stderr", r.stderr, "cat: can't open '.env': Permission denied")
		assertContains(t, "stderr", r.stderr, "ls: /usr: No such file or directory") // the image's root, not the host's
		if strings.Contains(r.stdout, "hunter2") {
			t.Error(".env leaked")
		}
		assertContains(t, "stdout", r.stdout, "interfaces: lo\n") // --network none, or an empty netns
		if uid, _, err := linux.Owner(filepath.Join(w.ws, "out.txt")); err != nil || uid != 1000 {
			t.Errorf("out.txt on the host: %v, uid %d; want it written by uid 1000", err, uid)
		}

		// Egress works in any image: busybox's wget through pid1's bridge.
		up := newUpstream(t, false, "127.0.0.2:0")
		other := newUpstream(t, false, "127.0.0.2:0")
		w.imageContract(image, "network:\n  allow:\n    - {cidr: 127.0.0.2/32, ports: ["+up.port+"], why: test}\n")
		r = w.sh("wget -q -O - http://127.0.0.2:" + up.port + "/hello; wget -q -O - http://127.0.0.2:" + other.port + "/hello; echo rc=$?")
		assertContains(t, "allowed", r.stdout, "hello from upstream")
		assertContains(t, "denied", r.stderr, "403 Forbidden")
		if other.hits.Load() != 0 {
			t.Error("the denied request reached its upstream")
		}

		// A missing image is a clear 125 that names it; nothing is pulled.
		w.imageContract("cordon-test/absent:1", "")
		r = w.sh("true")
		if r.code != 125 {
			t.Fatalf("missing image: want 125, got %v", r)
		}
		assertContains(t, "stderr", r.stderr, `image "cordon-test/absent:1"`)
		assertContains(t, "stderr", r.stderr, "pull: never")
	})
}

// testTar is a root file system with the given entries (a trailing / makes a
// directory).
func testTar(t *testing.T, entries ...string) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e, Mode: 0o755, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if strings.HasSuffix(e, "/") {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	return buf.Bytes()
}

// importImage makes a local image in Docker and in containerd's "cordon" namespace.
func importImage(t *testing.T, name string, rootfs []byte, changes ...string) {
	t.Helper()
	args := []string{"import"}
	for _, c := range changes {
		args = append(args, "-c", c)
	}
	cmd := exec.Command("docker", append(args, "-", name)...)
	cmd.Stdin = bytes.NewReader(rootfs)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker import: %v: %s", err, out)
	}
	save := exec.Command("sh", "-c", "docker save "+name+" | ctr -n cordon images import --all-platforms -")
	if out, err := save.CombinedOutput(); err != nil {
		t.Fatalf("importing into containerd: %v: %s", err, out)
	}
}
