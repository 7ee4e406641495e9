package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// traceRecord is one line of a trace file (internal/trace.Record).
type traceRecord struct {
	Pid   int    `json:"pid"`
	Prog  string `json:"prog"`
	Name  string `json:"name"`
	Start int64  `json:"start_ns"`
	End   int64  `json:"end_ns"`
}

// readTrace parses path as JSON lines, each a record with a pid, a name and an end
// not before its start, and returns them.
func readTrace(t *testing.T, path string) []traceRecord {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []traceRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		var r traceRecord
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		if r.Pid <= 0 || r.Name == "" || r.Start <= 0 || r.End < r.Start {
			t.Errorf("trace record %+v: want a pid, a name, 0 < start <= end", r)
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return recs
}

func missingNames(recs []traceRecord, want []string) []string {
	seen := map[string]bool{}
	for _, r := range recs {
		seen[r.Name] = true
	}
	var missing []string
	for _, n := range want {
		if !seen[n] {
			missing = append(missing, n)
		}
	}
	return missing
}

// TestTraceRun: cordon run --trace FILE writes the phases of the run's critical path
// as JSON lines, process 1's start-up included (reported in its status line); the
// sandbox's environment does not name the file; a run without --trace adds nothing.
func TestTraceRun(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(t.TempDir(), "run.jsonl")
	r := w.cordon("", "run", "--backend", "bwrap", "--trace", path, "--", "sh", "-c", "echo ${CORDON_TRACE-unset}")
	if r.code != 0 {
		t.Fatalf("cordon run --trace: %v", r)
	}
	if strings.TrimSpace(r.stdout) != "unset" {
		t.Errorf("the sandbox sees CORDON_TRACE=%q; want it unset", strings.TrimSpace(r.stdout))
	}
	recs := readTrace(t, path)
	want := []string{
		"process.start", "process.init", "cordon.main", "cli.contract", "runner.run",
		"audit.open", "audit.fsync.run.start", "rundir", "placeholders", "egress.start", "sandbox.start",
		"bwrap.spawn", "init.started", "init.spec_wait", "init.check", "sandbox.status", "bwrap.wait",
		"baseline", "audit.cmd_start", "command", "audit.cmd_end", "diff",
		"teardown", "audit.seal", "rundir.release", "rundir.remove",
	}
	if m := missingNames(recs, want); len(m) > 0 {
		t.Errorf("trace of cordon run lacks %q", m)
	}

	if r := w.cordon("", "run", "--backend", "bwrap", "--", "true"); r.code != 0 {
		t.Fatalf("cordon run: %v", r)
	}
	if again := readTrace(t, path); len(again) != len(recs) {
		t.Errorf("a run without --trace appended %d records to the last trace", len(again)-len(recs))
	}
}

// TestTraceSessionExec: a session started with CORDON_TRACE traces its supervisor's
// side of each exec to the file cordon exec --trace names, each process with its pid.
func TestTraceSessionExec(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(t.TempDir(), "session.jsonl")
	env := w.env
	w.env = append(append([]string{}, env...), "CORDON_TRACE="+path)
	r := w.cordon("", "session", "start", "--backend", "bwrap")
	w.env = env
	if r.code != 0 {
		t.Fatalf("session start: %v", r)
	}
	sid := strings.TrimSpace(r.stdout)
	t.Cleanup(func() { w.cordon("", "session", "stop", sid) })
	if r := w.cordon("", "exec", "--trace", path, sid, "--", "true"); r.code != 0 {
		t.Fatalf("cordon exec --trace: %v", r)
	}
	// The supervisor ends its span after it has answered: the client may be back
	// first, and the record follows.
	want := []string{"exec.open", "exec.request", "supervise.exec", "baseline", "command", "diff"}
	var recs []traceRecord
	deadline := time.Now().Add(30 * time.Second)
	for recs = readTrace(t, path); len(missingNames(recs, want)) > 0 && time.Now().Before(deadline); recs = readTrace(t, path) {
		time.Sleep(20 * time.Millisecond)
	}
	if m := missingNames(recs, want); len(m) > 0 {
		t.Errorf("trace of a warm exec lacks %q", m)
	}
	pids := map[string]int{}
	for _, r := range recs {
		pids[r.Name] = r.Pid
	}
	if pids["exec.request"] == pids["supervise.exec"] {
		t.Errorf("the client and the supervisor wrote as one pid (%d)", pids["exec.request"])
	}
}
