package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

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
		{[]string{"--", "sh", "-c", "sleep 654 >/dev/null 2>&1 & echo started"}, "started\n"},
		{[]string{"--", "sh", "-c", "pgrep -f 'sleep 654' >/dev/null && echo alive"}, "alive\n"},
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

// fiftyK prints 50,000 characters: 5,000 lines "line0000." to "line4999.".
const fiftyK = `awk 'BEGIN { for (i = 0; i < 5000; i++) printf "line%04d.\n", i }'`

// TestSessionCapSpillSweep: --json caps each stream at 10,000 characters by default;
// the whole output is in a spill file the sandbox can read but not change; sweep and
// stop delete spill files.
func TestSessionCapSpillSweep(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	r := w.cordon("", "exec", id, "--json", "--", "sh", "-c", fiftyK)
	var res wire.Result
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &res) != nil {
		t.Fatalf("exec --json: %v", r)
	}
	if !res.Truncated || res.SpillPath == "" || !strings.HasPrefix(res.SpillPath, "/run/cordon/spill/") {
		t.Fatalf("want truncated with a spill path: %+v", res)
	}
	kept, notice, _ := strings.Cut(res.Stdout, "[cordon: ")
	if len(kept) > 10000 || !strings.HasPrefix(kept, "line0000.\n") || !strings.HasSuffix(kept, ".\n") {
		t.Errorf("kept part: %d characters, want at most 10000 whole lines from the start", len(kept))
	}
	if !strings.Contains(notice, res.SpillPath) || !strings.Contains(notice, "50000") {
		t.Errorf("notice does not name the spill file and the size: %q", notice)
	}
	full := w.cordon("", "exec", id, "--", "cat", res.SpillPath)
	want := w.cordon("", "exec", id, "--", "sh", "-c", fiftyK)
	if full.code != 0 || len(full.stdout) != 50000 || full.stdout != want.stdout {
		t.Fatalf("spill file is not the whole output: %d bytes, exit %d", len(full.stdout), full.code)
	}
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo forged > "+res.SpillPath); r.code == 0 || !strings.Contains(r.stderr, "Read-only") {
		t.Errorf("the sandbox could overwrite a spill file: %v", r)
	}
	// Without --json, --cap streams the kept part and ends with the notice.
	r = w.cordon("", "exec", id, "--cap", "100", "--", "sh", "-c", fiftyK)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 11 || lines[0] != "line0000." || !strings.HasPrefix(lines[10], "[cordon: output cut at 100 of 50000") {
		t.Errorf("--cap 100: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo a > a.txt; mkdir -p sub; echo b > sub/b.txt"); r.code != 0 {
		t.Fatalf("exec: %v", r)
	}
	if r := w.cordon("", "session", "sweep", "--json", id); r.code != 0 || strings.TrimSpace(r.stdout) != `{"schema":"cordon.session.sweep/v1","removed":2,"changed":["a.txt","sub/b.txt"]}` {
		t.Errorf("sweep: want 2 spill files removed and the turn's changed paths: %v", r)
	}
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "ls -A /run/cordon/spill | wc -l"); strings.TrimSpace(r.stdout) != "0" {
		t.Errorf("spill files left after sweep: %v", r)
	}
	if r := w.cordon("", "exec", id, "--json", "--", "echo", "short"); !strings.Contains(r.stdout, `"truncated":false`) || !strings.Contains(r.stdout, `"spill_path":""`) {
		t.Errorf("short output: %v", r)
	}
}

// TestSessionGoClient drives a session from Go as a harness would: buffered and
// streamed execs, stdin, cancellation, sweep and stop.
func TestSessionGoClient(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	s, err := session.Start(ctx, session.StartOptions{Cordon: testutil.Cordon(t), Dir: w.ws, Env: w.env, Backend: backendOf(w)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	res, err := s.Exec(ctx, []string{"sh", "-c", "echo out; echo err >&2; echo x > f; exit 7"}, session.ExecOptions{Cap: 10000})
	if err != nil || res.ExitCode != 7 || res.Stdout != "out\n" || res.Stderr != "err\n" || res.Diffstat.Files != 1 {
		t.Fatalf("buffered exec: %+v %v", res, err)
	}
	turn, err := s.Sweep(ctx)
	if err != nil || strings.Join(turn.Changed, ",") != "f" {
		t.Fatalf("sweep: want the turn's one changed file f: %+v %v", turn, err)
	}
	if turn, err := s.Sweep(ctx); err != nil || len(turn.Changed) != 0 {
		t.Fatalf("second sweep: want a new, empty turn: %+v %v", turn, err)
	}
	var out bytes.Buffer
	res, err = s.Exec(ctx, []string{"tr", "a-z", "A-Z"}, session.ExecOptions{Stdin: strings.NewReader("piped\n"), Stdout: &out})
	if err != nil || res.ExitCode != 0 || out.String() != "PIPED\n" {
		t.Fatalf("streamed exec with stdin: %+v %v %q", res, err, out.String())
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	if _, err := s.Exec(cctx, []string{"sleep", "432"}, session.ExecOptions{}); err == nil || time.Since(began) > 5*time.Second {
		t.Fatalf("cancelled exec: %v after %s", err, time.Since(began))
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(processesMatching("sleep 432")) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := processesMatching("sleep 432"); len(p) > 0 {
		t.Errorf("a cancelled command kept running: %v", p)
	}
	if _, err := s.Exec(ctx, []string{"true"}, session.ExecOptions{Dir: "/nonexistent"}); err == nil {
		t.Error("exec in a missing directory: want an error")
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	var ce *session.Error
	if _, err := s.Exec(ctx, []string{"true"}, session.ExecOptions{}); err == nil || !asClientError(err, &ce) || ce.Code != 125 {
		t.Errorf("exec after stop: want a 125 error, got %v", err)
	}
}

func asClientError(err error, ce **session.Error) bool {
	e, ok := err.(*session.Error)
	*ce = e
	return ok
}

// backendOf is the backend a world's cordon uses ("" means its default).
func backendOf(w *world) string {
	for _, kv := range w.env {
		if b, ok := strings.CutPrefix(kv, "CORDON_BACKEND="); ok {
			return b
		}
	}
	return ""
}

// TestSessionContainerRemovedAtStop: a container session's container exists while it
// runs and is gone after stop.
func TestSessionContainerRemovedAtStop(t *testing.T) {
	for _, b := range containerBackends {
		t.Run(b, func(t *testing.T) {
			requireEngines(t)
			t.Setenv("CORDON_BACKEND", b)
			w := newWorld(t)
			id := w.startSession()
			if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo 1 > /tmp/n"); r.code != 0 {
				t.Fatalf("exec: %v", r)
			}
			if r := w.cordon("", "exec", id, "--", "cat", "/tmp/n"); r.stdout != "1\n" {
				t.Fatalf("/tmp did not persist in the %s session: %v", b, r)
			}
			if n := containersOf(t, b, id); n != 1 {
				t.Fatalf("want the session's one container, got %d", n)
			}
			if r := w.cordon("", "session", "stop", id); r.code != 0 {
				t.Fatalf("stop: %v", r)
			}
			if n := containersOf(t, b, id); n != 0 {
				t.Errorf("%d container(s) left after stop", n)
			}
		})
	}
}

// containersOf counts the engine's containers labelled with run id.
func containersOf(t *testing.T, backend, id string) int {
	t.Helper()
	var cmd *exec.Cmd
	if backend == "docker" {
		cmd = exec.Command("docker", "ps", "-aq", "--filter", "label=cordon.run="+id)
	} else {
		cmd = exec.Command("ctr", "-n", "cordon", "containers", "ls", "-q", fmt.Sprintf("labels.%q==%s", "cordon.run", id))
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return len(strings.Fields(string(out)))
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

func haveCmd(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

func (w *world) gateAdminDir() string { return paths.Root(w.runRoot).Gates() }

// TestSessionCommandCgroups: each command of a session runs in a cgroup of its own, so
// a timeout kills what it started with setsid too, and a monitor alert names the
// command that caused it even while a later command is running.
func TestSessionCommandCgroups(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, cat, sleep, setsid, \"true\"]}\n")
	id := w.startSession()
	r := w.cordon("", "exec", id, "--timeout", "1s", "--", "sh", "-c", "setsid sleep 543 & sleep 30")
	if r.code != 124 || !strings.Contains(r.stderr, "killed with everything it started") {
		t.Fatalf("timeout: %v", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(processesMatching("sleep 543")) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := processesMatching("sleep 543"); len(p) > 0 {
		t.Errorf("a setsid child outlived its command's timeout: %v", p)
	}
	// The violating command starts first; a later one is running when it violates.
	early := w.background("exec", id, "--", "sh", "-c", "sleep 1; cat /etc/shadow 2>/dev/null; true")
	time.Sleep(300 * time.Millisecond)
	late := w.cordon("", "exec", id, "--json", "--", "sleep", "2")
	early.wait(t)
	if late.code != 0 {
		t.Fatalf("late exec: %v", late)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	cmdOf := map[string]string{} // cmd id -> argv
	var alertCmd string
	for _, rec := range sessionEvents(t, w, id) {
		switch {
		case rec.Type == "cmd.start":
			cmdOf[fmtInt(rec.Seq)] = string(rec.Body)
		case rec.Type == "syscall.alert" && strings.Contains(string(rec.Body), "/etc/shadow"):
			alertCmd = rec.Cmd
		}
	}
	if !strings.Contains(cmdOf[alertCmd], "cat /etc/shadow") {
		t.Errorf("the /etc/shadow alert is joined to command %q (%s), not the one that read it", alertCmd, cmdOf[alertCmd])
	}
}
