package integration

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
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
