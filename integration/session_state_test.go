package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/session"
)

// startSession starts a session in w's workspace and stops it at the end of the test.
func (w *world) startSession(extra ...string) string {
	w.t.Helper()
	r := w.cordon("", append([]string{"session", "start"}, extra...)...)
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || audit.ValidateRunID(id) != nil {
		w.t.Fatalf("session start: %v", r)
	}
	w.t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(w.sessionsDir(), id+".sock")); err == nil {
			w.cordon("", "session", "stop", id)
		}
	})
	return id
}

// sessionsDir is where the world's sessions are published, in its own run root.
func (w *world) sessionsDir() string { return paths.Root(w.runRoot).Sessions() }

func sessionEvents(t *testing.T, w *world, id string) []audit.Record {
	t.Helper()
	recs, err := audit.ReadEvents(filepath.Join(w.auditRoot(), id, audit.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestSessionKeepsStateAndLogsEachCommand(t *testing.T) {
	w := newWorld(t)
	mustMkdir(t, filepath.Join(w.ws, "sub"))
	id := w.startSession()
	if r := w.cordon("", "session", "ls"); !strings.Contains(r.stdout, id+"\trunning") {
		t.Fatalf("session ls: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo one > state.txt"); r.code != 0 {
		t.Fatalf("exec 1: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "cat state.txt; echo two >> state.txt; exit 3"); r.code != 3 || r.stdout != "one\n" {
		t.Fatalf("exec 2: want exit 3 and the first command's file: %v", r)
	}
	if r := w.cordon("", "exec", id, "--dir", filepath.Join(w.ws, "sub"), "--", "pwd"); r.code != 0 || strings.TrimSpace(r.stdout) != filepath.Join(w.ws, "sub") {
		t.Fatalf("exec --dir: %v", r)
	}
	r := w.cordon("", "exec", id, "--json", "--", "sh", "-c", "echo three >> state.txt; echo out; echo err >&2; exit 4")
	var js map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &js) != nil {
		t.Fatalf("exec --json: %v", r)
	}
	for _, k := range []string{"v", "exit_code", "stdout", "stderr", "duration_ms", "diffstat", "denied_egress", "denied"} {
		if _, ok := js[k]; !ok {
			t.Errorf("exec --json: no %q in %s", k, r.stdout)
		}
	}
	if js["v"] != 1.0 || js["exit_code"] != 4.0 || js["stdout"] != "out\n" || js["stderr"] != "err\n" {
		t.Errorf("exec --json: %s", r.stdout)
	}
	if ds, _ := js["diffstat"].(map[string]any); ds["files"] != 1.0 || ds["insertions"] != 1.0 {
		t.Errorf("exec --json diffstat: %s", r.stdout)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	if r := w.cordon("", "audit", "verify", id); r.code != 0 {
		t.Fatalf("audit verify: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 125 {
		t.Errorf("exec after stop: want 125: %v", r)
	}
	for _, ext := range []string{".sock", ".json", ".log"} {
		assertAbsent(t, filepath.Join(w.sessionsDir(), id+ext))
	}
	recs := sessionEvents(t, w, id)
	starts := map[string]bool{}
	ends, diffs := map[string]bool{}, map[string]audit.FSDiff{}
	for _, rec := range recs {
		switch rec.Type {
		case "cmd.start":
			starts[fmtInt(rec.Seq)] = true
		case "cmd.end":
			ends[rec.Cmd] = true
		case "fs.diff":
			var d audit.FSDiff
			if err := rec.DecodeBody(&d); err != nil {
				t.Fatal(err)
			}
			diffs[rec.Cmd] = d
		}
	}
	if len(starts) != 4 || len(ends) != 4 || len(diffs) != 4 {
		t.Fatalf("want 4 cmd.start/cmd.end/fs.diff triples in one log, got %d/%d/%d", len(starts), len(ends), len(diffs))
	}
	for c := range starts {
		if !ends[c] {
			t.Errorf("cmd %s has no cmd.end", c)
		}
		if _, ok := diffs[c]; !ok {
			t.Errorf("cmd %s has no fs.diff", c)
		}
	}
	if last := recs[len(recs)-1]; last.Type != "run.end" {
		t.Errorf("log does not end with run.end: %s", last.Type)
	}
}

func fmtInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestSessionConcurrentDeniedAndTimeout(t *testing.T) {
	w := newWorld(t)
	w.contract("version: 1\ncommands:\n  deny: [\"curl *\"]\n")
	id := w.startSession()
	var wg sync.WaitGroup
	began := time.Now()
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(testutil.Cordon(t), "exec", id, "--", "sh", "-c", "sleep 1; echo x > c"+string(rune('0'+i)))
			cmd.Dir, cmd.Env = w.ws, w.env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("concurrent exec %d: %v %s", i, err, out)
			}
		}()
	}
	wg.Wait()
	if took := time.Since(began); took > 3500*time.Millisecond {
		t.Errorf("4 concurrent 1s commands took %s; they ran one after another", took)
	}
	for i := range 4 {
		if _, err := os.Stat(filepath.Join(w.ws, "c"+string(rune('0'+i)))); err != nil {
			t.Error(err)
		}
	}
	r := w.cordon("", "exec", id, "--", "curl", "https://example.com")
	if r.code != 125 || !strings.Contains(r.stderr, "denied") {
		t.Errorf("denied command: want 125 and a reason: %v", r)
	}
	r = w.cordon("", "exec", id, "--timeout", "500ms", "--", "sh", "-c", "sleep 30 & sleep 30")
	if r.code != 124 {
		t.Errorf("timeout: want 124: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo still"); r.code != 0 || r.stdout != "still\n" {
		t.Errorf("session unusable after a timeout: %v", r)
	}
	// A connection the proxy refused is named in the command's result.
	r = w.cordon("", "exec", id, "--json", "--", "wget", "-q", "-O", "/dev/null", "http://denied.example.com:8080/")
	var js struct {
		Denied    []string `json:"denied_egress"`
		Explained []struct {
			Destination, Reason string
		} `json:"denied"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil || len(js.Denied) != 1 || js.Denied[0] != "denied.example.com:8080" {
		t.Errorf("exec --json denied_egress: %v", r)
	}
	if len(js.Explained) != 1 || js.Explained[0].Destination != "denied.example.com:8080" || js.Explained[0].Reason != "not in network.allow" {
		t.Errorf("exec --json denied: %+v", js.Explained)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	for _, rec := range sessionEvents(t, w, id) {
		if rec.Type == "cmd.start" && strings.Contains(string(rec.Body), "curl") {
			t.Errorf("a denied command was logged as run: %s", rec.Body)
		}
	}
	if r := w.cordon("", "audit", "verify", id); r.code != 0 {
		t.Fatalf("audit verify: %v", r)
	}
}

func TestSessionSupervisorKilledLeavesNothing(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	pid := sessionPID(t, w, id)
	cmd := exec.Command(testutil.Cordon(t), "exec", id, "--", "sh", "-c", "sleep 987 & sleep 987")
	cmd.Dir, cmd.Env = w.ws, w.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Both sleeps themselves, not the client or a shell whose command line names them.
	deadline := time.Now().Add(10 * time.Second)
	for len(processesRunning("sleep 987")) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := linux.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("cordon exec did not end when its session's supervisor died")
	}
	// Gone means absent from two listings in a row: a process the kernel is killing
	// can show an empty command line to one listing and its own to the next.
	deadline = time.Now().Add(5 * time.Second)
	for clear := 0; clear < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if len(processesMatching("sleep 987")) == 0 {
			clear++
		} else {
			clear = 0
		}
	}
	if p := processesMatching("sleep 987"); len(p) > 0 {
		t.Errorf("processes left running after the supervisor was killed: %s", describeProcesses(p))
	}
	if r := w.cordon("", "session", "ls"); !strings.Contains(r.stdout, id+"\tdead") {
		t.Errorf("session ls: want it dead: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 125 {
		t.Errorf("exec in a dead session: want 125: %v", r)
	}
	if r := w.cordon("", "gc"); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("gc: %v", r)
	}
	for _, ext := range []string{".sock", ".json", ".log"} {
		assertAbsent(t, filepath.Join(w.sessionsDir(), id+ext))
	}
	assertAbsent(t, filepath.Join(w.runRoot, id))
}

// TestSessionIsOneSandbox: a session's commands share one sandbox: /tmp, $HOME and
// background processes persist between execs (each with its own working directory),
// and stop ends them all.
func TestSessionIsOneSandbox(t *testing.T) {
	w := newWorld(t)
	mustMkdir(t, w.ws+"/sub")
	id := w.startSession()
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"--", "sh", "-c", "echo kept > /tmp/t; echo home > $HOME/h; cd /tmp; pwd"}, "/tmp\n"},
		{[]string{"--", "sh", "-c", "cat /tmp/t $HOME/h; pwd"}, "kept\nhome\n" + w.ws + "\n"},
		{[]string{"--dir", w.ws + "/sub", "--", "pwd"}, w.ws + "/sub\n"},
		{[]string{"--", "sh", "-c", "sleep 654 >/dev/null 2>&1 & echo $! > /tmp/bg; echo started"}, "started\n"},
		// The very process the last exec left is alive and in reach of this one (kill
		// -0 is the shell's own: a busybox image has no pgrep), and is that sleep.
		{[]string{"--", "sh", "-c", "kill -0 $(cat /tmp/bg) && tr '\\0' ' ' < /proc/$(cat /tmp/bg)/cmdline"}, "sleep 654 "},
	}
	for i, s := range steps {
		r := w.cordon("", append([]string{"exec", id}, s.args...)...)
		if r.code != 0 || r.stdout != s.want {
			t.Fatalf("step %d: want %q: %v", i, s.want, r)
		}
	}
	if r := w.cordon("fed through -i\n", "exec", id, "-i", "--", "sh", "-c", "cat; echo end"); r.stdout != "fed through -i\nend\n" {
		t.Errorf("exec -i: stdin not forwarded: %v", r)
	}
	if r := w.cordon("not forwarded\n", "exec", id, "--", "cat"); r.code != 0 || r.stdout != "" {
		t.Errorf("exec without -i: want an empty stdin: %v", r)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(processesMatching("sleep 654")) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := processesMatching("sleep 654"); len(p) > 0 {
		t.Errorf("a background process of the session outlived stop: %v", p)
	}
}

// TestSessionSandboxKilledEndsTheSession: when the sandbox dies under the supervisor
// (killed from outside, as an OOM kill would), the supervisor tears the session down
// and seals its log with the reason; later execs fail with 125.
func TestSessionSandboxKilledEndsTheSession(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	info, err := session.OpenWith(w.env, id)
	if err != nil {
		t.Fatal(err)
	}
	kids := childrenOf(info.Info().PID)
	if len(kids) == 0 {
		t.Fatal("the supervisor has no child (the sandbox)")
	}
	for _, pid := range kids {
		_ = linux.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for info.Info().Alive() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if info.Info().Alive() {
		t.Fatal("the supervisor kept running after its sandbox died")
	}
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 125 {
		t.Errorf("exec after the sandbox died: want 125: %v", r)
	}
	recs := sessionEvents(t, w, id)
	last := recs[len(recs)-1]
	if last.Type != "run.end" || !strings.Contains(string(last.Body), "ended on its own") {
		t.Errorf("log does not end with run.end saying the sandbox ended: %s %s", last.Type, last.Body)
	}
	if r := w.cordon("", "audit", "verify", id); r.code != 0 {
		t.Errorf("audit verify: %v", r)
	}
}

// childrenOf lists the pids whose parent is pid (children are listed per thread that
// forked them).
func childrenOf(pid int) []int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
