package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

// world is one test's host: a workspace, a fake home with credentials in it, and the
// environment cordon runs with.
type world struct {
	t    *testing.T
	ws   string
	home string
	env  []string
	// runRoot is the world's own run root ($CORDON_RUN_ROOT): runs, sessions, gate
	// sockets and gc of concurrent tests (and of other cordons on the machine) stay apart.
	runRoot string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	testutil.RequireBwrap(t)
	root := t.TempDir()
	w := &world{t: t, ws: filepath.Join(root, "ws"), home: filepath.Join(root, "home")}
	mustMkdir(t, w.ws)
	mustWrite(t, filepath.Join(w.home, ".ssh", "id_rsa"), "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret-key-material\n")
	mustWrite(t, filepath.Join(w.home, "notes.txt"), "home notes\n")
	w.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + w.home,
		"LANG=C.UTF-8",
		"AWS_SECRET_ACCESS_KEY=aws-secret-value-123",
		"GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
		"SSH_AUTH_SOCK=/tmp/ssh-agent.sock",
	}
	w.runRoot = shortTempDir(t)
	worldRoots.Store(w.runRoot, true)
	w.env = append(w.env, paths.RunRootEnv+"="+w.runRoot)
	// CORDON_BACKEND runs the tests against that backend (setup_containers_test.go loops
	// over the container backends with it).
	if b := os.Getenv("CORDON_BACKEND"); b != "" {
		w.env = append(w.env, "CORDON_BACKEND="+b)
		// The kubernetes backend's placement (pod_escapes_test.go).
		for _, name := range []string{"CORDON_PLACEMENT_CONFIG", "CORDON_KUBECONFIG", "CORDON_TENANT"} {
			if v, ok := os.LookupEnv(name); ok {
				w.env = append(w.env, name+"="+v)
			}
		}
	}
	return w
}

// result is what one cordon invocation did.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return "exit " + strconv.Itoa(r.code) + "\nstdout: " + r.stdout + "\nstderr: " + r.stderr
}

// cordon runs the cordon binary in the workspace with stdin.
func (w *world) cordon(stdin string, args ...string) result {
	w.t.Helper()
	bin := testutil.Cordon(w.t) // built (once) before the command's two minutes start
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = w.ws
	cmd.Env = w.env
	cmd.Stdin = strings.NewReader(stdin)
	return runResult(w.t, cmd, "cordon")
}

// sh runs a shell script in the sandbox with the built-in or given contract.
// shIn is sh with dir, not the world's workspace, as the run's workspace (its audit
// root and run root are the world's).
func (w *world) shIn(dir, script string) result {
	w.t.Helper()
	cmd := exec.Command(testutil.Cordon(w.t), "run", "--", "sh", "-c", script)
	cmd.Dir, cmd.Env = dir, w.env
	return runResult(w.t, cmd, "cordon")
}

func (w *world) sh(script string, extra ...string) result {
	w.t.Helper()
	args := append([]string{"run"}, extra...)
	return w.cordon("", append(args, "--", "sh", "-c", script)...)
}

func (w *world) contract(yaml string) string {
	w.t.Helper()
	p := filepath.Join(w.ws, "cordon.yaml")
	mustWrite(w.t, p, yaml)
	return p
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	mustMkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func assertAbsent(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Lstat(p); err == nil {
		t.Errorf("%s exists on the host; the sandbox must not have created it", p)
	}
}

func assertContains(t *testing.T, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%s: got %q; want it to contain %q", what, got, want)
	}
}

// processesMatching lists host pids whose command line contains s.
func processesMatching(s string) []string { return processesWhere(s, strings.Contains) }

// processesRunning lists the pids whose command line is exactly cmdline: the process
// itself, not one (cordon, a shell) that names it in its arguments.
func processesRunning(cmdline string) []string {
	return processesWhere(cmdline, func(got, want string) bool { return strings.TrimSpace(got) == want })
}

func processesWhere(s string, match func(got, want string) bool) []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if match(strings.ReplaceAll(string(data), "\x00", " "), s) {
			out = append(out, d.Name())
		}
	}
	return out
}

// describeProcesses names each pid with its command line and the State, PPid and
// NSpid lines of its status: enough to tell a leaked process from one being reaped.
func describeProcesses(pids []string) string {
	var b strings.Builder
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		status, _ := os.ReadFile(filepath.Join("/proc", pid, "status"))
		fmt.Fprintf(&b, "\n  %s %q", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
		for _, line := range strings.Split(string(status), "\n") {
			if k, _, _ := strings.Cut(line, ":"); k == "State" || k == "PPid" || k == "NSpid" {
				b.WriteString(" " + strings.Join(strings.Fields(line), " "))
			}
		}
	}
	return b.String()
}

// processesWithCwd lists host pids whose working directory is dir: what a sandbox
// started in that workspace left running.
func processesWithCwd(dir string) []string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if cwd, err := os.Readlink(filepath.Join("/proc", d.Name(), "cwd")); err == nil && cwd == dir {
			out = append(out, d.Name())
		}
	}
	return out
}

// useRunRoot makes the world's cordons use root, another world's run root.
func (w *world) useRunRoot(root string) {
	for i, e := range w.env {
		if strings.HasPrefix(e, paths.RunRootEnv+"=") {
			w.env[i] = paths.RunRootEnv + "=" + root
		}
	}
	w.runRoot = root
}

// shortTempDir is a private directory removed after the test, with a path short enough
// for the unix sockets of a run below it (108 bytes; t.TempDir's paths hold the test name).
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", shortTempPrefix(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unmountUnder(d)
		os.RemoveAll(d)
	})
	return d
}

// unmountUnder detaches whatever is mounted at or below dir, deepest first: a tenant's
// disk that a daemon killed by the test left mounted (cordon serve unmounts it when it
// stops), whose loop device the kernel frees with the mount.
func unmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, m := range linux.ParseMountinfo(string(data)) {
		if m.Point == dir || strings.HasPrefix(m.Point, dir+"/") {
			points = append(points, m.Point)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		_ = linux.Unmount(p)
	}
}

// worldRoots holds every world's run root, for the checks that nothing is left behind.
var worldRoots sync.Map

// runRoots lists the default run root and every world's.
func runRoots() []string {
	out := []string{paths.RunRoot().String()}
	worldRoots.Range(func(k, _ any) bool { out = append(out, k.(string)); return true })
	return out
}

// stagedMountsLeft lists the staged overlays still mounted below a run root of this
// test process: those of other processes (another test binary's runs) are theirs.
func stagedMountsLeft() []string {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	var left []string
	for _, m := range linux.ParseMountinfo(string(data)) {
		if !strings.Contains(m.Point, "staged-workspace") {
			continue
		}
		for _, root := range runRoots() {
			if strings.HasPrefix(m.Point, root+"/") {
				left = append(left, m.Point)
			}
		}
	}
	return left
}

// runResult runs cmd and returns its output and exit status; a command that could not
// be run at all (not a non-zero exit) fails the test.
func runResult(t testing.TB, cmd *exec.Cmd, what string) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("running %s: %v", what, err)
	}
	return r
}

// procStatus is the field key (VmRSS, VmHWM) of /proc/PID/status, in bytes.
func procStatus(t *testing.T, pid int, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", key, pid)
	return 0
}
