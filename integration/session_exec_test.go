package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/session"
	"github.com/cordonhq/cordon/session/wire"
)

// execVia runs exec's arguments args through one of its two entry points: `cordon
// exec` or the cordon-exec binary.
func (w *world) execVia(bin, stdin string, args ...string) result {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	if bin == "cordon-exec" {
		cmd = exec.CommandContext(ctx, testutil.CordonExec(w.t), args...)
	} else {
		cmd = exec.CommandContext(ctx, testutil.Cordon(w.t), append([]string{"exec"}, args...)...)
	}
	cmd.Dir, cmd.Env = w.ws, w.env
	cmd.Stdin = strings.NewReader(stdin)
	return runResult(w.t, cmd, bin)
}

// TestCordonExecBinaryIsCordonExec: the small cordon-exec binary and `cordon exec`, one
// implementation behind two entry points, give the same exit status, stdout, stderr and
// --json document on a real session, for a command that ran, help (the same text, but
// for the name), a usage error, an unknown
// session, a denied connection and a timeout.
func TestCordonExecBinaryIsCordonExec(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	tests := []struct {
		name  string
		stdin string
		args  []string
		code  int
		// stderr is what stderr holds; a %s in it is the entry point's own name
		// ("cordon exec" or "cordon-exec"), for the lines that name it.
		stderr string
		stdout string // when not ""
		json   bool
	}{
		{name: "exit status and output", args: []string{id, "--", "sh", "-c", "echo out; echo err >&2; exit 3"}, code: 3, stderr: "err\n", stdout: "out\n"},
		{name: "flags after SESSION", stdin: "piped\n", args: []string{id, "-i", "--dir", w.ws, "tr", "a-z", "A-Z"}, code: 0, stdout: "PIPED\n"},
		{name: "json", args: []string{"--json", id, "--", "sh", "-c", "echo out; echo err >&2; exit 4"}, code: 0, json: true},
		{name: "help", args: []string{id, "--help"}, code: 0},
		{name: "usage error", args: []string{id, "--nope", "--", "true"}, code: 2, stderr: "cordon: exec: unknown flag: --nope; see %s --help\n"},
		{name: "no command", args: []string{id}, code: 2, stderr: "cordon: exec: give a SESSION and a command (%s SESSION -- CMD [ARGS...])\n"},
		{name: "unknown session", args: []string{"20990101T000000Z-abcdef", "--", "true"}, code: 125, stderr: "cordon: no such session 20990101T000000Z-abcdef (cordon session ls)\n"},
		{name: "denied egress", args: []string{id, "--", "sh", "-c", "wget -q -O /dev/null http://denied.example.com:8080/ 2>/dev/null; exit 1"}, code: 1,
			stderr: "cordon: egress denied: denied.example.com:8080 (not in network.allow; to allow: network.allow: [{host: denied.example.com, ports: [8080]}])\n"},
		{name: "timeout", args: []string{id, "--timeout", "300ms", "--", "sh", "-c", "sleep 30"}, code: 124},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got [2]result
			for i, bin := range []string{"cordon", "cordon-exec"} {
				r := w.execVia(bin, tt.stdin, tt.args...)
				if r.code != tt.code {
					t.Errorf("%s: exit %d; want %d: %v", bin, r.code, tt.code, r)
				}
				prog := map[string]string{"cordon": "cordon exec", "cordon-exec": "cordon-exec"}[bin]
				if want := strings.ReplaceAll(tt.stderr, "%s", prog); tt.stderr != "" && r.stderr != want {
					t.Errorf("%s: stderr %q; want %q", bin, r.stderr, want)
				}
				if tt.stdout != "" && r.stdout != tt.stdout {
					t.Errorf("%s: stdout %q; want %q", bin, r.stdout, tt.stdout)
				}
				r.stderr = strings.ReplaceAll(r.stderr, prog, "PROG")
				if tt.name == "help" {
					r.stderr = withoutServerHelp(r.stderr)
				}
				if tt.json {
					r.stdout = normalisedExecJSON(t, r.stdout)
				}
				got[i] = r
			}
			if got[0] != got[1] {
				t.Errorf("cordon exec and cordon-exec differ:\ncordon exec: %v\ncordon-exec: %v", got[0], got[1])
			}
		})
	}
}

// withoutServerHelp is exec's help without what differs by design: cordon exec's
// flags naming a server (--host and its companions), and cordon-exec's line saying it
// reaches none.
func withoutServerHelp(help string) string {
	var kept []string
	for _, l := range strings.Split(help, "\n") {
		if strings.Contains(l, "--host URL") || strings.Contains(l, "with --host:") || strings.Contains(l, "reaches no cordon serve daemon") {
			continue
		}
		kept = append(kept, l)
	}
	return strings.TrimRight(strings.Join(kept, "\n"), "\n")
}

// normalisedExecJSON is an exec --json document without what differs from one command
// to the next (its id and duration), after checking its schema.
func normalisedExecJSON(t *testing.T, doc string) string {
	t.Helper()
	var js map[string]any
	if err := json.Unmarshal([]byte(doc), &js); err != nil {
		t.Fatalf("exec --json: %v: %q", err, doc)
	}
	if js["schema"] != "cordon.exec/v1" || js["exit_code"] != 4.0 || js["stdout"] != "out\n" || js["stderr"] != "err\n" {
		t.Errorf("exec --json: %s", doc)
	}
	delete(js, "cmd")
	delete(js, "duration_ms")
	b, _ := json.Marshal(js)
	return string(b)
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
	if r := w.cordon("", "session", "sweep", "--json", id); r.code != 0 || strings.TrimSpace(r.stdout) != `{"schema":"cordon.session.sweep/v1","removed":2,"changed":["a.txt","sub/b.txt"],"more":0}` {
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

// TestRedACordonExecEscapes (red team A): the strings of a session command's result
// that cordon-exec ends with on the user's terminal, the destinations it was denied
// and the paths of its monitor alerts, are the sandbox's choosing; they arrive escaped.
func TestRedACordonExecEscapes(t *testing.T) {
	w := newWorld(t)
	testutil.RequireRoot(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, mkdir, cp, \"true\"]}\n")
	mustWrite(t, filepath.Join(w.ws, "names.pl"), hostileNames)
	id := w.startSession()
	run := func(argv ...string) result {
		cmd := exec.Command(testutil.CordonExec(t), append([]string{id, "--"}, argv...)...)
		cmd.Dir, cmd.Env = w.ws, w.env
		return runResult(t, cmd, "cordon-exec")
	}
	denied := run("perl", "names.pl", "0", "1")
	// An interpreter monitor.exec does not name, copied into directories with hostile
	// names and run there; its own stderr goes nowhere, so all that is left is
	// cordon-exec's.
	alerted := run("sh", "-c", `for n in "a$(printf '\033[2J\007')b" "c$(printf '\342\200\256')d"; do mkdir "$n" && cp "$(command -v perl)" "$n/perl" && "./$n/perl" -e 1; done 2>/dev/null; true`)
	assertContains(t, "cordon-exec's denials", denied.stderr, `cordon: egress denied: a\x1b[2J\x1b]0;pwned\x07.example:443`)
	assertContains(t, "cordon-exec's alerts", alerted.stderr, `a\x1b[2J\x07b`)
	assertContains(t, "cordon-exec's alerts", alerted.stderr, `c\u202ed`)
	for what, out := range map[string]string{"denials": denied.stderr, "alerts": alerted.stderr} {
		for _, bad := range []string{"\x1b", "\x07", "\x00", "\u202e", "\ncordon: egress allowed"} {
			if strings.Contains(out, bad) {
				t.Errorf("cordon-exec's %s write %q from a name the sandbox chose:\n%s", what, bad, out)
			}
		}
	}
}
