package monitor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/internal/testutil/bpfroots"
)

// The test binary doubles as the workload: with CORDON_MONITOR_HELPER set, TestMain runs
// helperMain instead of the tests.
const helperEnv = "CORDON_MONITOR_HELPER"

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		os.Exit(helperMain(h, os.Args[1:]))
	}
	// The helpers are this binary, under -race too: each would wait a second at its
	// exit (the race runtime's atexit_sleep_ms) for reports from goroutines it does
	// not have. They inherit the environment; this process read GORACE already.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	// The tests pin their programs in a root of their own, and leave nothing there;
	// what killed test processes left is removed first.
	bpfroots.Sweep()
	root := fmt.Sprintf("/sys/fs/bpf/cordon-test-%d", os.Getpid())
	os.Setenv(paths.BPFRootEnv, root)
	code := m.Run()
	if _, err := gc(context.Background(), root); err != nil {
		fmt.Fprintln(os.Stderr, "monitor test: gc:", err)
		code = 99
	}
	if ents, err := os.ReadDir(root); err == nil && len(ents) > 0 {
		fmt.Fprintf(os.Stderr, "monitor test: pins left in %s: %v\n", root, ents)
		code = 99
	}
	os.Remove(root)
	os.Remove(paths.BPFLock(root))
	os.Exit(code)
}

// helperMain does one thing the tests watch, then exits.
func helperMain(what string, args []string) int {
	switch what {
	case "connect": // connect to each address; failures are expected
		for _, a := range args {
			network, addr, _ := strings.Cut(a, "=")
			if c, err := net.DialTimeout(network, addr, 200*time.Millisecond); err == nil {
				c.Close()
			}
		}
	case "open": // open each path: "r:PATH" read-only, "w:PATH" for writing (O_CREAT)
		for _, a := range args {
			flags := syscall.O_RDONLY
			if strings.HasPrefix(a, "w:") {
				flags = syscall.O_WRONLY | syscall.O_CREAT
			}
			linux.ProbeOpen(a[2:], flags)
		}
	case "unfaulted": // open each path (read-only) from a page not faulted in yet
		for _, a := range args {
			linux.ProbeOpenUnfaulted(a, syscall.O_RDONLY)
		}
	case "dropped": // open args[1] args[0] times from a page another thread keeps dropping
		var n int
		fmt.Sscan(args[0], &n)
		opened, err := linux.ProbeOpenDropped(args[1], syscall.O_RDONLY, n)
		fmt.Println(opened, err)
	case "openin": // each "HOW:DIR:PATH": open PATH through a descriptor of DIR (redteam_linux_test.go)
		for _, a := range args {
			how, rest, _ := strings.Cut(a, ":")
			dir, path, _ := strings.Cut(rest, ":")
			openIn(how, dir, path)
		}
	case "unfaulted-threads": // N threads, each M opens of ARG/T-I from untouched pages
		var n, m int
		fmt.Sscan(args[0], &n)
		fmt.Sscan(args[1], &m)
		unfaultedThreads(n, m, args[2])
	case "badpointer": // an openat the kernel fails with EFAULT, then one of args[0]
		fmt.Println(linux.ProbeOpenBadPointer())
		linux.ProbeOpen(args[0], syscall.O_RDONLY)
	case "flood-violate": // 3 threads of sent, allowed opens; the time, then /etc/shadow
		floodThenViolate()
	case "distinct": // N opens of distinct paths outside every profile
		var n int
		fmt.Sscan(args[0], &n)
		for i := 0; i < n; i++ {
			linux.ProbeOpen(fmt.Sprintf("%s-%d", ratePath, i), syscall.O_RDONLY)
		}
	case "syscalls": // high-signal syscalls that fail or only touch this process
		_ = linux.ProbeUnshareUser()
		_ = linux.ProbeMount()
	case "rate": // open /dev/null N times at R per second (0: as fast as possible)
		var n, rate int
		fmt.Sscan(args[0], &n)
		fmt.Sscan(args[1], &rate)
		return openLoop(n, rate)
	case "start": // try to start a monitor (as an unprivileged user)
		_, err := Start(context.Background(), Options{CgroupID: 1})
		fmt.Println(errors.Is(err, errdefs.ErrUnavailable), err)
	case "hold": // start a monitor on cgroup id args[0], say so, and wait to be killed
		var id uint64
		fmt.Sscan(args[0], &id)
		if _, err := Start(context.Background(), Options{CgroupID: id}); err != nil {
			fmt.Println("error:", err)
			return 1
		}
		fmt.Println("ready")
		time.Sleep(time.Minute)
	case "init-threads": // process 1 of a nested sandbox that calls from other threads too
		initThreads(args)
	case "init": // process 1 of a nested sandbox: run the command, wait
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "init:", err)
		}
	}
	return 0
}

// ratePath is what the rate helper opens: a path outside every test profile, so that
// the path filter sends each open to user space (an allowed one would stay in the
// kernel and prove nothing about the ring buffer).
const ratePath = "/nonexistent-cordon-rate"

func openLoop(n, rate int) int {
	start := time.Now()
	for i := 0; i < n; i++ {
		if e := linux.ProbeOpen(ratePath, syscall.O_RDONLY); e != 0 && e != syscall.ENOENT {
			return 1
		}
		if rate > 0 && i%100 == 99 {
			if d := time.Duration(i+1) * time.Second / time.Duration(rate); time.Since(start) < d {
				time.Sleep(d - time.Since(start))
			}
		}
	}
	return 0
}

// harness is one monitored cgroup and what the monitor reported.
type harness struct {
	t  testing.TB
	cg *linux.Cgroup
	m  *Monitor

	mu      sync.Mutex
	alerts  []Alert
	records []Record
}

func requireBPF(t testing.TB) {
	t.Helper()
	testutil.RequireRoot(t)
	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	testutil.Require(t, err == nil, "the kernel has no BTF")
}

func newHarness(t testing.TB, prof Profile, opts Options) *harness {
	return newHarnessHooks(t, prof, opts, true)
}

// newHarnessHooks is newHarness; without hooks, records and alerts are not kept (benchmarks).
func newHarnessHooks(t testing.TB, prof Profile, opts Options, hooks bool) *harness {
	t.Helper()
	requireBPF(t)
	name := fmt.Sprintf("monitor-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	cg, err := linux.NewCgroup(name, linux.Limits{})
	if err != nil {
		t.Fatalf("creating cgroup: %v", err)
	}
	t.Cleanup(func() { cg.Remove() })
	h := &harness{t: t, cg: cg}
	opts.CgroupID, opts.Profile = cg.ID, prof
	opts.Events = event.SinkFunc(func(e event.Event) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.alerts = append(h.alerts, alertOf(e.Body.(event.SyscallAlertBody)))
	})
	opts.onRecord = func(r Record) {
		for i := range r.Str {
			r.Str[i] = bytes.Clone(r.Str[i])
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.records = append(h.records, r)
	}
	if !hooks {
		opts.Events, opts.onRecord = nil, nil
	}
	if h.m, err = Start(context.Background(), opts); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { h.m.Close() })
	return h
}

// command returns a command that starts inside the harness's cgroup.
func (h *harness) command(env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = env
	// Pdeathsig: a workload outlives a test binary killed mid-test (an OOM kill left a
	// flood of opens running for 20 minutes) unless it dies with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: h.cg.FD(), Pdeathsig: syscall.SIGKILL}
	return cmd
}

// run runs a command in the cgroup and waits until its events are handled.
func (h *harness) run(env []string, name string, args ...string) string {
	h.t.Helper()
	out, err := h.command(env, name, args...).CombinedOutput()
	if err != nil {
		h.t.Logf("%s %q: %v\n%s", name, args, err, out)
	}
	h.m.drain()
	return string(out)
}

func (h *harness) helper(what string, args ...string) {
	h.t.Helper()
	exe, _ := os.Executable()
	h.run(append(os.Environ(), helperEnv+"="+what), exe, args...)
}

func (h *harness) got() ([]Alert, []Record) {
	h.m.drain()
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Alert(nil), h.alerts...), append([]Record(nil), h.records...)
}

func (h *harness) find(pred func(Alert) bool) (Alert, bool) {
	alerts, _ := h.got()
	for _, a := range alerts {
		if pred(a) {
			return a, true
		}
	}
	return Alert{}, false
}

// hostProfile is a profile for processes running on the host, without a sandbox.
func hostProfile(writable ...string) Profile {
	plan := &contract.Plan{Mounts: []contract.Mount{
		{Path: "/usr", Access: contract.ReadOnly, Why: "@system"},
		{Path: "/etc", Access: contract.ReadOnly, Why: "@system"},
		{Path: "/etc/shadow", Access: contract.Hidden, Why: "@system never shows host secrets"},
	}, Links: []contract.Link{{Path: "/bin", Target: "usr/bin"}, {Path: "/lib", Target: "usr/lib"}, {Path: "/lib64", Target: "usr/lib64"}}}
	for _, w := range writable {
		plan.Mounts = append(plan.Mounts, contract.Mount{Path: w, Access: contract.ReadWrite, Why: "test"})
	}
	return FromPlan(plan)
}

func TestExecOfInterpreterAlerts(t *testing.T) {
	h := newHarness(t, hostProfile(), Options{})
	nc, err := exec.LookPath("nc")
	if err != nil { // not installed: a symlink by that name is enough for the name rule
		nc = filepath.Join(t.TempDir(), "nc")
		if err := os.Symlink("/usr/bin/true", nc); err != nil {
			t.Fatal(err)
		}
	}
	h.run(nil, "/usr/bin/python3", "-c", "pass")
	h.run(nil, nc, "-h")
	h.run(nil, "/usr/bin/git", "--version")
	for _, want := range []string{"python3", "nc"} {
		a, ok := h.find(func(a Alert) bool {
			return a.Rule == RuleExec && len(a.Argv) > 0 && filepath.Base(a.Argv[0]) == filepath.Base(map[string]string{"python3": "/usr/bin/python3", "nc": nc}[want])
		})
		if !ok {
			t.Errorf("no exec alert for %s", want)
			continue
		}
		if a.Syscall != "execve" || a.Path == "" || a.Action != ActionAlert || a.Cgroup != h.cg.ID {
			t.Errorf("alert for %s = %+v", want, a)
		}
		t.Logf("%s", a)
	}
	if a, ok := h.find(func(a Alert) bool { return a.Rule == RuleExec && a.Comm == "git" }); ok {
		t.Errorf("git alerted: %s", a)
	}

	allowed := hostProfile()
	allowed.Exec = []string{"python3"}
	h2 := newHarness(t, allowed, Options{})
	h2.run(nil, "/usr/bin/python3", "-c", "pass")
	if a, ok := h2.find(func(a Alert) bool { return a.Rule == RuleExec }); ok {
		t.Errorf("python3 in monitor.exec still alerted: %s", a)
	}
}

func TestOpenOfShadowAlerts(t *testing.T) {
	h := newHarness(t, hostProfile(), Options{})
	h.run(nil, "/usr/bin/cat", "/etc/shadow")
	h.run(nil, "/usr/bin/env", "-C", "/etc", "/usr/bin/cat", "shadow") // relative to the cwd
	h.run(nil, "/usr/bin/touch", "/nonexistent-cordon-test/x")         // a write attempt that fails
	for _, c := range []struct{ comm, path, access string }{
		{"cat", "/etc/shadow", "read"}, {"touch", "/nonexistent-cordon-test/x", "write"},
	} {
		var n int
		alerts, _ := h.got()
		for _, a := range alerts {
			if a.Comm == c.comm && a.Path == c.path && a.Access == c.access {
				n++
				t.Logf("%s", a)
			}
		}
		if want := map[string]int{"cat": 2, "touch": 1}[c.comm]; n < want {
			t.Errorf("%d alerts for %s of %s; want %d", n, c.access, c.path, want)
		}
	}
	if a, ok := h.find(func(a Alert) bool { return a.Path == "/etc/ld.so.cache" || a.Path == "/dev/null" }); ok {
		t.Errorf("a readable path alerted: %s", a)
	}
}

func TestConnectAlerts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h := newHarness(t, hostProfile(), Options{})
	h.helper("connect", "tcp="+ln.Addr().String(), "tcp=127.0.0.1:3128", "tcp6=[::1]:9", "unix=/run/cordon/egress.sock", "unix=/nonexistent-cordon-test.sock")
	for _, addr := range []string{ln.Addr().String(), "[::1]:9", "unix:/run/cordon/egress.sock", "unix:/nonexistent-cordon-test.sock"} {
		a, ok := h.find(func(a Alert) bool { return a.Rule == RuleConnect && a.Addr == addr })
		if !ok {
			t.Errorf("no alert for a connect to %s", addr)
			continue
		}
		t.Logf("%s", a)
	}
	if a, ok := h.find(func(a Alert) bool { return a.Addr == "127.0.0.1:3128" }); ok {
		t.Errorf("the proxy's address alerted: %s", a)
	}
}

func TestHighSignalSyscallsAlert(t *testing.T) {
	h := newHarness(t, hostProfile(), Options{})
	h.helper("syscalls")
	for _, sc := range []string{"unshare", "mount"} {
		a, ok := h.find(func(a Alert) bool { return a.Rule == RuleSyscall && a.Syscall == sc })
		if !ok {
			t.Errorf("no alert for %s", sc)
			continue
		}
		t.Logf("%s", a)
	}
}

// TestBenignBuildNoAlerts: a Go build and git in a workspace deviate from nothing.
func TestBenignBuildNoAlerts(t *testing.T) {
	requireBPF(t)
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	out, err := exec.Command(goBin, "env", "GOROOT", "GOCACHE").Output()
	testutil.Require(t, err == nil, "needs the go command")
	goEnv := strings.Fields(string(out))
	ws := t.TempDir()
	home, tmp := filepath.Join(ws, ".home"), filepath.Join(ws, ".tmp")
	os.MkdirAll(tmp, 0o755)
	for f, data := range map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n",
	} {
		if err := os.WriteFile(filepath.Join(ws, f), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(home, 0o755)
	prof := hostProfile(ws, goEnv[1])
	prof.Paths = append(prof.Paths, PathRule{Path: goEnv[0], Access: contract.ReadOnly, Why: "GOROOT"})
	h := newHarness(t, prof, Options{})
	env := []string{"HOME=" + home, "PATH=" + filepath.Dir(goBin) + ":/usr/bin", "GOCACHE=" + goEnv[1],
		"GOPATH=" + filepath.Join(ws, ".gopath"), "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "TMPDIR=" + tmp, "CGO_ENABLED=0"}
	h.run(env, goBin, "-C", ws, "build", "-o", filepath.Join(ws, "hello"), ".")
	h.run(env, "/usr/bin/git", "-C", ws, "init", "-q")
	h.run(env, "/usr/bin/git", "-C", ws, "status", "--short")
	if out := h.run(env, filepath.Join(ws, "hello")); out != "hello\n" {
		t.Fatalf("the build did not work: %q", out)
	}
	alerts, records := h.got()
	for _, a := range alerts {
		t.Errorf("benign build alerted: %s", a)
	}
	if s := h.m.Stats(); uint64(len(records))+s.Filtered < 100 {
		t.Errorf("only %d records and %d filtered opens for a build: is the monitor watching?", len(records), s.Filtered)
	}
	t.Logf("%d records, stats %+v", len(records), h.m.Stats())
}

// TestOtherProcessesSendNothing: the same deviations outside the run's cgroup never
// leave the kernel.
func TestOtherProcessesSendNothing(t *testing.T) {
	h := newHarness(t, hostProfile(), Options{})
	for _, args := range [][]string{{"/usr/bin/cat", "/etc/shadow"}, {"/usr/bin/python3", "-c", "pass"}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%q: %v %s", args, err, out)
		}
	}
	exe, _ := os.Executable()
	outside := exec.Command(exe)
	outside.Env = append(os.Environ(), helperEnv+"=syscalls")
	if err := outside.Run(); err != nil {
		t.Fatal(err)
	}
	if alerts, records := h.got(); len(records) != 0 || len(alerts) != 0 {
		t.Errorf("processes outside the cgroup produced %d records, %d alerts: %+v", len(records), len(alerts), records[0])
	}
	h.run(nil, "/usr/bin/true")
	if _, records := h.got(); len(records) == 0 {
		t.Error("a process inside the cgroup produced no record")
	}
}

// TestKillMode: on_violation: kill stops the whole run at the first alert.
func TestKillMode(t *testing.T) {
	first := make(chan Alert, 1)
	prof := hostProfile()
	prof.Exec = []string{"sh"}
	h := newHarness(t, prof, Options{OnViolation: func(a Alert) { first <- a }})
	killed := make(chan Alert, 1)
	go func() { // what the runner does: stop the whole run
		a := <-first
		h.cg.Kill(5 * time.Second)
		killed <- a
	}()
	cmd := h.command(nil, "/bin/sh", "-c", "/usr/bin/cat /etc/shadow >/dev/null; /usr/bin/sleep 30")
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the workload ended with %v; want SIGKILL (exit 137)", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("killed after %v", d)
	}
	a := <-killed
	if !strings.Contains(a.String(), "/etc/shadow") {
		t.Errorf("first alert %q does not name the violation", a)
	}
	t.Logf("killed after %v: %s", time.Since(start).Round(time.Millisecond), a)
}

// TestRequiredWithoutPrivileges: an unprivileged user cannot load the monitor and is told why.
func TestRequiredWithoutPrivileges(t *testing.T) {
	testutil.RequireRoot(t)
	exe, _ := os.Executable()
	dir, err := os.MkdirTemp("", "monitor-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "monitor.test")
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	cmd := exec.Command(bin)
	cmd.Env = []string{helperEnv + "=start"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v %s", err, out)
	}
	if !strings.HasPrefix(string(out), "true ") || !strings.Contains(string(out), "needs root") {
		t.Errorf("Start as nobody: %s; want an unavailable error saying it needs root", out)
	}
	t.Logf("%s", out)
}

// TestCloseReleasesEverything: Close detaches and closes every link, map and program
// (no file descriptor left once Released is closed) and is idempotent.
func TestCloseReleasesEverything(t *testing.T) {
	requireBPF(t)
	before := countFDs(t)
	h := newHarness(t, hostProfile(), Options{})
	if during := countFDs(t); during <= before {
		t.Fatalf("%d fds while running, %d before: the count is not seeing the monitor", during, before)
	}
	if err := h.m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	<-h.m.Released()
	h.cg.Remove()
	if after := countFDs(t); after != before {
		t.Errorf("%d fds after Close, %d before", after, before)
	}
	h.m.Stats() // usable after Close
}

func countFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// nestedInitArgs are bwrap's arguments for a sandbox whose process 1 is this test binary
// (run as an init, as cordon's is, at /run/cordon/cordon) and whose workload is argv.
func nestedInitArgs(argv ...string) []string {
	exe, _ := os.Executable()
	return append([]string{"--unshare-all", "--die-with-parent", "--as-pid-1",
		"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--ro-bind", "/etc", "/etc", "--dev", "/dev", "--proc", "/proc",
		"--tmpfs", "/tmp", "--ro-bind", exe, "/run/cordon/cordon", "--", "/run/cordon/cordon"}, argv...)
}

// TestNestedSandbox: in a bwrap sandbox whose process 1 is an init (the test binary,
// as cordon's is), bwrap building the sandbox and the init are machinery and are not
// watched with Nested; the workload is. Without Nested, bwrap's mounts are deviations.
func TestNestedSandbox(t *testing.T) {
	testutil.RequireBwrap(t)
	args := nestedInitArgs("/usr/bin/python3", "-c", "open('/etc/hostname').read()")
	env := append(os.Environ(), helperEnv+"=init")
	for _, nested := range []bool{true, false} {
		t.Run(fmt.Sprintf("nested=%v", nested), func(t *testing.T) {
			prof := hostProfile()
			prof.Paths = append(prof.Paths, PathRule{Path: "/run/cordon", Access: contract.ReadOnly, Why: "init"})
			h := newHarness(t, prof, Options{Nested: nested})
			h.run(env, "/usr/bin/bwrap", args...)
			alerts, records := h.got()
			var python, machinery int
			for _, a := range alerts {
				switch {
				case a.Rule == RuleExec && a.Comm == "python3":
					python++
				case a.Comm == "bwrap" || a.Comm == "cordon":
					machinery++
				default:
					t.Errorf("unexpected alert: %s", a)
				}
			}
			if python != 1 {
				t.Errorf("%d exec alerts for python3; want 1 (%d records)", python, len(records))
			}
			if nested && machinery > 0 {
				t.Errorf("%d alerts from bwrap or init with Nested", machinery)
			}
			if !nested && machinery == 0 {
				t.Error("no alert from bwrap's mounts without Nested: is the test seeing the sandbox?")
			}
			t.Logf("nested=%v: %d records, %d machinery alerts", nested, len(records), machinery)
		})
	}
}
