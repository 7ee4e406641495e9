package audit

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/event"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// renderRun writes a run with two commands, a workspace diff, egress decisions, an alert,
// credential events and hostile strings, and returns its log path.
func renderRun(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.go", "package main\n\nfunc main() {}\n")
	tr, err := fsdiff.New(context.Background(), ws, fsdiff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := newWriter(t, Options{})
	w.Emit(event.Event{Type: event.CredIssue, Body: event.CredIssueBody{Name: "GITHUB_TOKEN", Provider: "github", TTLSec: 900}})
	cmd, _ := w.StartCmd(CmdStart{Argv: []string{"sh", "-c", "go test ./... && echo '<script>alert(1)</script>'"}, Cwd: "/w", Env: []string{"HOME", "PATH"}})
	w.Emit(event.Event{Type: event.NetAllow, Cmd: cmd, Body: event.NetBody{Host: "proxy.golang.org", Port: 443, Proto: "connect", Rule: "proxy.golang.org:443", Reason: "host matches rule", BytesUp: 517, BytesDown: 4096, DurationMS: 35}})
	w.Emit(event.Event{Type: event.NetDeny, Cmd: cmd, Body: event.NetBody{Host: "evil.example", Port: 443, Proto: "connect", Reason: "no rule allows host \"evil.example\""}})
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	w.Emit(event.Event{Type: event.NetAllowSummary, Cmd: cmd, Body: event.NetAllowSummaryBody{
		Allowed: 5000, BytesUp: 70, BytesDown: 9000, Intercepted: 2, Requests: 3, Failed: 4990, Destinations: 1025, DestinationsAtLeast: true,
		Named: map[string]event.AllowedTo{
			"127.0.0.3:9":                  {Attempts: 4000},
			"evil\x1b[2J<script>.test:443": {Attempts: 10, BytesUp: 70, BytesDown: 9000, Intercepted: 2},
		},
		Other: &event.AllowedTo{Attempts: 990}, First: t0, Last: t0.Add(1450 * time.Millisecond)}})
	out := NewCapture(0)
	out.Write([]byte("ok  \x1b[31mexample\x1b[0m 0.1s\n<b>not bold</b>\n"))
	write("main.go", "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"<hi>\") }\n")
	write("evil\x1b[2J.txt", "x\n")
	w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd, Body: CmdEnd{ExitCode: 0, DurationMS: 1234, Stdout: out.Output(), Stderr: NewCapture(0).Output()}})
	diffAndRecord(t, tr, w, cmd)
	cmd2, _ := w.StartCmd(CmdStart{Argv: []string{"rm", "main.go"}, Cwd: "/w"})
	w.Emit(event.Event{Type: event.SyscallAlert, Cmd: cmd2, Body: event.SyscallAlertBody{Syscall: "ptrace", Comm: "rm", PID: 42, Reason: "not in profile"}})
	if err := os.Remove(filepath.Join(ws, "main.go")); err != nil {
		t.Fatal(err)
	}
	w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd2, Body: CmdEnd{ExitCode: 137, Signal: "SIGKILL", DurationMS: 20}})
	diffAndRecord(t, tr, w, cmd2)
	w.Emit(event.Event{Type: event.NetDeny, Body: event.NetBody{Host: "10.0.0.1", Port: 22, Reason: "private address"}})
	w.Emit(event.Event{Type: event.CredRevoke, Body: event.CredRevokeBody{Name: "GITHUB_TOKEN"}})
	if err := w.Close(RunEnd{ExitCode: 137, Reason: ReasonMonitor, Detail: "ptrace by rm"}); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

func diffAndRecord(t *testing.T, tr *fsdiff.Tracker, w *Writer, cmd string) {
	t.Helper()
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res.Scan = fsdiff.ScanStats{} // timings vary
	for i := range res.Changes {
		res.Changes[i].OldMtime, res.Changes[i].NewMtime = time.Time{}, time.Time{} // so do file times
	}
	if err := w.RecordDiff(cmd, res, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRender(t *testing.T) {
	recs, err := ReadEvents(renderRun(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		golden string
		render func(*bytes.Buffer) error
	}{
		{"timeline.txt", func(b *bytes.Buffer) error { return WriteTimeline(b, recs, TimelineOptions{}) }},
		{"timeline_diff.txt", func(b *bytes.Buffer) error { return WriteTimeline(b, recs, TimelineOptions{Diff: true}) }},
		{"report.html", func(b *bytes.Buffer) error {
			rep := Report{Lines: len(recs), Sealed: true, Head: recs[len(recs)-1].Hash}
			return WriteHTML(b, recs, HTMLOptions{Verify: &rep})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.render(&b); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if strings.Contains(out, "\x1b") {
				t.Error("output contains a raw escape character")
			}
			if strings.HasSuffix(tt.golden, ".html") && strings.Contains(out, "<script>") {
				t.Error("HTML output contains an unescaped <script>")
			}
			golden(t, filepath.Join("testdata", tt.golden), out)
		})
	}
}

func TestTimelineUnsealed(t *testing.T) {
	w, _ := newWriter(t, Options{})
	if _, err := w.StartCmd(CmdStart{Argv: []string{"sleep", "100"}}); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadEvents(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteTimeline(&b, recs, TimelineOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"did not finish", "UNSEALED"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("timeline lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := WriteHTML(&b, recs, HTMLOptions{}); err != nil || !strings.Contains(b.String(), "UNSEALED") {
		t.Errorf("HTML: %v\n%s", err, b.String())
	}
}

func golden(t *testing.T, file, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run go test -update and review the diff)\ngot:\n%s", file, got)
	}
}
