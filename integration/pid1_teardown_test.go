package integration

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/runner/container"
)

// The teardown tests break cordon's process 1 from the host (SIGSTOP, which is what a
// ptrace stop amounts to; SIGKILL; a stop while a command waits on it) and the engine
// (its API stops answering), on every backend, in a session and in a plain run. Each
// must end promptly, without a panic, with a sealed log whose run.end says what
// happened, and with nothing of the run left.

// teardownBackends are the backends the process 1 tests run on.
var teardownBackends = []string{"bwrap", "docker", "containerd"}

// teardownWorld is a world using backend: the host view under bwrap, the test image
// in a container.
func teardownWorld(t *testing.T, backend string) *world {
	t.Helper()
	w := newWorld(t)
	w.env = append(w.env, "CORDON_BACKEND="+backend)
	if backend != "bwrap" {
		w.imageContract(requireEngines(t), "")
	}
	return w
}

func TestTeardownProcess1(t *testing.T) {
	testutil.RequireRoot(t)
	requireEngines(t)
	for _, backend := range teardownBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			t.Run("session/stopped", func(t *testing.T) { sessionProcess1Stopped(t, backend, false) })
			t.Run("session/hung", func(t *testing.T) { sessionProcess1Stopped(t, backend, true) })
			t.Run("session/killed", func(t *testing.T) { sessionProcess1Killed(t, backend, false) })
			t.Run("session/killed-stop", func(t *testing.T) { sessionProcess1Killed(t, backend, true) })
			t.Run("run/stopped", func(t *testing.T) { runProcess1(t, backend, syscall.SIGSTOP) })
			t.Run("run/killed", func(t *testing.T) { runProcess1(t, backend, syscall.SIGKILL) })
		})
	}
}

// sessionProcess1Stopped stops the session's process 1 (with a command waiting on it
// when inFlight: process 1 never answers it), then stops the session.
func sessionProcess1Stopped(t *testing.T, backend string, inFlight bool) {
	w := teardownWorld(t, backend)
	id := w.startSession()
	if r := w.cordon("", "exec", id, "--", "echo", "hi"); r.code != 0 || r.stdout != "hi\n" {
		t.Fatalf("exec: %v", r)
	}
	pid := process1(t, backend, id, sessionPID(t, w, id))
	if err := linux.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "process 1 to stop", func() bool { return processState(pid) == "T" })
	var execDone chan result
	if inFlight {
		execDone = make(chan result, 1)
		go func() { execDone <- w.cordon("", "exec", id, "--", "echo", "never") }()
		waitFor(t, 15*time.Second, "the second command's cmd.start", func() bool {
			return countEvents(w, id, "cmd.start") == 2
		})
	}
	began := time.Now()
	var r result
	if inFlight {
		r = w.cordon("", "session", "stop", id)
	} else {
		r = secondStop(t, w, id)
	}
	took := time.Since(began)
	assertNoPanic(t, "session stop", r.stderr)
	if r.code != 125 {
		t.Errorf("session stop: want 125 (process 1 did not end; its sandbox was killed), got %v", r)
	}
	assertContains(t, "session stop", r.stderr, "did not end within")
	if took > 10*time.Second {
		t.Errorf("session stop took %s; want it bounded (a few seconds)", took)
	}
	if inFlight {
		select {
		case er := <-execDone:
			assertNoPanic(t, "exec", er.stderr)
			if er.code == 0 || strings.Contains(er.stdout, "never") {
				t.Errorf("the command process 1 never ran: want it failed, got %v", er)
			}
		case <-time.After(10 * time.Second):
			t.Error("the command waiting on the stopped process 1 did not end with the session")
		}
	}
	assertSealed(t, w, id, audit.ReasonError, "did not end within")
	assertSessionGone(t, w, backend, id)
}

// secondStop sends a stop while another one is tearing the session down (its process
// 1 is stopped: the teardown waits out the hang-up's grace): the second must not be
// answered before the first, with the session's placeholders still in the workspace.
// It returns the second's result, checked against the first's.
func secondStop(t *testing.T, w *world, id string) result {
	t.Helper()
	first := make(chan result, 1)
	go func() { first <- w.cordon("", "session", "stop", id) }()
	// A sweep touches nothing in the sandbox: refused once the stop is taken.
	waitFor(t, 15*time.Second, "the first stop to be taken", func() bool {
		return w.cordon("", "session", "sweep", id).code != 0
	})
	r := w.cordon("", "session", "stop", id)
	if left := leftInWorkspace(w); len(left) != 0 {
		t.Errorf("a stop sent during another one's teardown returned (%v) with %q still in the workspace", r, left)
	}
	select {
	case f := <-first:
		if f.code != r.code {
			t.Errorf("the first stop: %v; the second: %v", f, r)
		}
	case <-time.After(20 * time.Second):
		t.Error("the first stop did not return")
	}
	return r
}

// leftInWorkspace lists what is in the world's workspace besides its contract: the
// teardown tests' commands write nothing, so anything else is a run's placeholder.
func leftInWorkspace(w *world) []string {
	ents, _ := os.ReadDir(w.ws)
	var left []string
	for _, e := range ents {
		if e.Name() != "cordon.yaml" {
			left = append(left, e.Name())
		}
	}
	return left
}

// sessionProcess1Killed kills the session's process 1: the supervisor tears the
// session down on its own. The stop is sent once it has, or at once when atOnce (it
// then waits for that teardown, whichever began first).
func sessionProcess1Killed(t *testing.T, backend string, atOnce bool) {
	w := teardownWorld(t, backend)
	id := w.startSession()
	pid := process1(t, backend, id, sessionPID(t, w, id))
	if err := linux.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !atOnce {
		waitFor(t, 15*time.Second, "the supervisor to tear the session down", func() bool {
			_, err := os.Stat(filepath.Join(w.sessionsDir(), id+".json"))
			return os.IsNotExist(err)
		})
	}
	r := w.cordon("", "session", "stop", id)
	assertNoPanic(t, "session stop", r.stderr)
	if r.code != 125 {
		t.Errorf("session stop of an ended session: want 125, got %v", r)
	}
	assertSealed(t, w, id, audit.ReasonError, "ended on its own")
	assertSessionGone(t, w, backend, id)
}

// runProcess1 sends sig to the process 1 of a `cordon run` whose command is running.
func runProcess1(t *testing.T, backend string, sig syscall.Signal) {
	w := teardownWorld(t, backend)
	cmd := exec.Command(testutil.Cordon(t), "run", "--timeout", "3s", "--", "sh", "-c", "echo ready; sleep 30")
	cmd.Dir, cmd.Env = w.ws, w.env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the command did not start: %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	id := onlyRun(t, w)
	pid := process1(t, backend, id, cmd.Process.Pid)
	if err := linux.Kill(pid, sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("cordon run did not end")
	}
	code := 0
	if ee, ok := werr.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	assertNoPanic(t, "cordon run", stderr.String())
	// A stopped process 1 cannot report the command's end: the timeout kills the
	// sandbox. A killed one ends the pid namespace, the command with it.
	want, reason := errdefs.ExitTimeout, audit.ReasonTimeout
	if sig == syscall.SIGKILL {
		want, reason = 128+int(syscall.SIGKILL), audit.ReasonExited
	}
	if code != want {
		t.Errorf("cordon run: want exit %d, got %d (%v); stderr: %s", want, code, werr, stderr.String())
	}
	assertSealed(t, w, id, reason, "")
	assertSessionGone(t, w, backend, id)
}

// TestTeardownEngineHung points cordon at an engine socket that stops answering in
// the middle of a session: stop must still return (every engine call of the
// teardown has a deadline), say what it could not remove, seal the log, and cordon gc,
// with the engine back, removes the rest. The engines themselves are untouched: the
// socket is a proxy of this test's.
func TestTeardownEngineHung(t *testing.T) {
	requireEngines(t)
	for _, c := range []struct{ backend, socket, env string }{
		{"docker", "/var/run/docker.sock", "DOCKER_HOST=unix://"},
		{"containerd", "/run/containerd/containerd.sock", "CONTAINERD_ADDRESS="},
	} {
		t.Run(c.backend, func(t *testing.T) {
			t.Parallel()
			w := teardownWorld(t, c.backend)
			px := newEngineProxy(t, c.socket)
			engineEnv := append([]string(nil), w.env...)
			w.env = append(w.env, c.env+px.path)
			id := w.startSession()
			if r := w.cordon("", "exec", id, "--", "echo", "hi"); r.code != 0 {
				t.Fatalf("exec through the proxy: %v", r)
			}
			px.hang.Store(true)
			began := time.Now()
			r := w.cordon("", "session", "stop", id)
			took := time.Since(began)
			assertNoPanic(t, "session stop", r.stderr)
			if r.code != 125 {
				t.Errorf("session stop with a hung engine: want 125 with what is left, got %v", r)
			}
			assertContains(t, "session stop", r.stderr, "cordon gc removes it later")
			if took > 25*time.Second {
				t.Errorf("session stop took %s with a hung engine; want every engine call bounded", took)
			}
			assertSealed(t, w, id, audit.ReasonExited, "teardown: ")
			w.env = engineEnv // the engine answers again
			// The container is left to any gc once its supervisor is gone: another
			// test's `cordon gc` on this machine (CI runs lanes at once) may take it
			// first, and this one then has nothing of it to say. Either way it must go.
			if r := w.cordon("", "gc"); r.code != 0 {
				t.Errorf("gc: %v", r)
			} else if !strings.Contains(r.stdout, id) {
				t.Logf("gc did not name the session (another gc on this machine took its container first?): %v", r)
			}
			assertSessionGone(t, w, c.backend, id)
		})
	}
}

// engineProxy forwards connections to an engine's socket until hang is set; from then
// on it accepts and reads, but nothing reaches either side.
type engineProxy struct {
	path string
	hang atomic.Bool
}

func newEngineProxy(t *testing.T, target string) *engineProxy {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "engine-proxy-") // short: a socket path has a limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	px := &engineProxy{path: filepath.Join(dir, "engine.sock")}
	ln, err := net.Listen("unix", px.path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if px.hang.Load() {
				go func() { _, _ = io.Copy(io.Discard, c) }()
				continue
			}
			up, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, up)
			mu.Unlock()
			go px.pipe(up, c)
			go px.pipe(c, up)
		}
	}()
	return px
}

// pipe copies src to dst until hang is set, then swallows what src sends.
func (px *engineProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !px.hang.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !px.hang.Load() {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
			}
			return
		}
	}
}

// sessionPID is the pid of session id's supervisor.
func sessionPID(t *testing.T, w *world, id string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(w.sessionsDir(), id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(data, &info); err != nil || info.PID == 0 {
		t.Fatalf("session json: %v %s", err, data)
	}
	return info.PID
}

// process1 is the host pid of run id's process 1: the container's init, or under
// bwrap the `cordon internal init` below owner (cordon or the session's supervisor).
func process1(t *testing.T, backend, id string, owner int) int {
	t.Helper()
	name := container.Name(id)
	pid := 0
	waitFor(t, 15*time.Second, "process 1 of run "+id, func() bool {
		switch backend {
		case "docker":
			out, _ := exec.Command("docker", "inspect", "--format", "{{.State.Pid}}", name).Output()
			pid, _ = strconv.Atoi(strings.TrimSpace(string(out)))
		case "containerd":
			out, _ := exec.Command("ctr", "-n", "cordon", "tasks", "ls").Output()
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) >= 3 && f[0] == name && f[2] == "RUNNING" {
					pid, _ = strconv.Atoi(f[1])
				}
			}
		default:
			// bwrap's own command line names init too: process 1 is the one that
			// is pid 1 of its namespace (pids wrap, so their order tells nothing).
			for _, p := range processesMatching("/run/cordon/cordon internal init") {
				n, _ := strconv.Atoi(p)
				if descendsFrom(n, owner) && pidOneOfNamespace(n) {
					pid = n
				}
			}
		}
		return pid > 1
	})
	return pid
}

// pidOneOfNamespace reports whether pid is process 1 of a pid namespace below the
// host's: the last of its NSpid pids is 1.
func pidOneOfNamespace(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && k == "NSpid" {
			f := strings.Fields(v)
			return len(f) > 1 && f[len(f)-1] == "1"
		}
	}
	return false
}

// processState is the state letter of pid's /proc stat ("T": stopped), or "".
func processState(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(data)
	if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 {
		return f[0]
	}
	return ""
}

// descendsFrom reports whether pid is a descendant of ancestor.
func descendsFrom(pid, ancestor int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			return false
		}
		pid, _ = strconv.Atoi(f[1])
		if pid == ancestor {
			return true
		}
	}
	return false
}

// onlyRun waits for the one run of w's audit root and returns its id.
func onlyRun(t *testing.T, w *world) string {
	t.Helper()
	id := ""
	waitFor(t, 10*time.Second, "the run's audit log", func() bool {
		entries, _ := os.ReadDir(w.auditRoot())
		for _, e := range entries {
			if audit.ValidateRunID(e.Name()) == nil {
				id = e.Name()
			}
		}
		return id != ""
	})
	return id
}

func countEvents(w *world, id, typ string) int {
	recs, _ := audit.ReadEvents(filepath.Join(w.auditRoot(), id, audit.EventsFile))
	n := 0
	for _, r := range recs {
		if string(r.Type) == typ {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func assertNoPanic(t *testing.T, what, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "panic:") || strings.Contains(stderr, "goroutine ") {
		t.Errorf("%s panicked: %s", what, stderr)
	}
}

// assertSealed checks that run id's log verifies and ends with run.end, with reason
// and a detail containing detail.
func assertSealed(t *testing.T, w *world, id, reason, detail string) {
	t.Helper()
	if r := w.cordon("", "audit", "verify", id); r.code != 0 {
		t.Errorf("audit verify: %v", r)
	}
	recs, err := audit.ReadEvents(filepath.Join(w.auditRoot(), id, audit.EventsFile))
	if err != nil || len(recs) == 0 {
		t.Fatalf("reading the log: %v", err)
	}
	last := recs[len(recs)-1]
	var end audit.RunEnd
	if last.Type != "run.end" || last.DecodeBody(&end) != nil {
		t.Fatalf("the log ends with %s %s; want run.end", last.Type, last.Body)
	}
	if end.Reason != reason || !strings.Contains(end.Detail, detail) {
		t.Errorf("run.end: got reason %q detail %q; want %q with %q", end.Reason, end.Detail, reason, detail)
	}
}

// assertSessionGone checks that nothing of run id is left: its supervisor's files
// (a supervisor that panicked leaves its log), its run directory, its cgroups and the
// engine's container, task and snapshot.
func assertSessionGone(t *testing.T, w *world, backend, id string) {
	t.Helper()
	if data, err := os.ReadFile(filepath.Join(w.sessionsDir(), id+".log")); err == nil {
		assertNoPanic(t, "the session's supervisor", string(data))
		t.Errorf("the supervisor's log is left: %s", data)
	}
	if left := leftInWorkspace(w); len(left) != 0 {
		t.Errorf("%q are left in the workspace, which the commands left as it was", left)
	}
	for _, p := range []string{
		filepath.Join(w.sessionsDir(), id+".sock"), filepath.Join(w.sessionsDir(), id+".json"),
		filepath.Join(w.runRoot, id),
	} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left", p)
		}
	}
	name := container.Name(id)
	v2, _, _ := linux.CgroupMounts()
	var cgroups []string
	switch {
	case backend == "bwrap" && v2 != "":
		cgroups = append(cgroups, filepath.Join(v2, "cordon", id))
	case backend == "containerd":
		cgroups = append(cgroups, filepath.Join("/sys/fs/cgroup/pids/cordon", name)) // v1 hosts
		if v2 != "" {
			cgroups = append(cgroups, filepath.Join(v2, "cordon", name))
		}
	}
	for _, cg := range cgroups {
		if _, err := os.Stat(cg); err == nil {
			t.Errorf("cgroup %s is left", cg)
		}
	}
	has := func(name string, args ...string) bool {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		for _, f := range strings.Fields(string(out)) {
			if f == container.Name(id) || f == id {
				return true
			}
		}
		return false
	}
	switch backend {
	case "docker":
		if has("docker", "ps", "-a", "--filter", "label=cordon.run="+id, "--format", "{{.Names}}") {
			t.Errorf("docker container %s is left", name)
		}
	case "containerd":
		for _, kind := range []string{"containers", "tasks", "snapshots"} {
			if has("ctr", "-n", "cordon", kind, "ls") {
				t.Errorf("containerd %s %s is left", kind, name)
			}
		}
	}
}
