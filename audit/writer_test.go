package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/event"
)

// netBody is what the egress proxy might emit; audit knows nothing of it.
type netBody struct {
	Dest   string `json:"dest"`
	Reason string `json:"reason,omitempty"`
}

const testRun = "20261129T201530Z-3fa9c1"

func testStart() RunStart {
	return RunStart{ContractPath: "/w/cordon.yaml", ContractDigest: "sha256:00", Backend: "bwrap",
		CordonVersion: "v0.0.0-test", Host: "host", User: "alice", Workspace: "/w"}
}

// fakeClock returns 2026-11-29T20:15:30Z and one millisecond more at each call.
func fakeClock() func() time.Time {
	var mu sync.Mutex
	t := time.Date(2026, 11, 29, 20, 15, 30, 0, time.UTC)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func newWriter(t testing.TB, opts Options) (*Writer, string) {
	t.Helper()
	root := t.TempDir()
	opts.Start = testStart()
	opts.now = fakeClock()
	w, err := Create(root, testRun, opts)
	if err != nil {
		t.Fatal(err)
	}
	return w, root
}

// writeSampleRun writes a small complete run and returns the path of its log.
func writeSampleRun(t *testing.T) string { return writeSampleRunF(t) }

func writeSampleRunF(t testing.TB) string {
	t.Helper()
	w, _ := newWriter(t, Options{})
	cmd, err := w.StartCmd(CmdStart{Argv: []string{"make", "test"}, Cwd: "/w", Env: []string{"PATH", "HOME=/root"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Emit(event.Event{Type: event.NetAllow, Cmd: cmd, Body: netBody{Dest: "proxy.golang.org:443"}})
	w.Emit(event.Event{Type: event.NetDeny, Cmd: cmd, Body: netBody{Dest: "evil.example:443", Reason: "no rule"}})
	w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd, Body: CmdEnd{ExitCode: 2, DurationMS: 1500}})
	if err := w.Close(RunEnd{ExitCode: 2, Reason: ReasonExited}); err != nil {
		t.Fatal(err)
	}
	return w.Path()
}

func TestCreateLayout(t *testing.T) {
	w, root := newWriter(t, Options{})
	if err := w.Close(RunEnd{Reason: ReasonExited}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		filepath.Join(root, testRun):             0o700 | os.ModeDir,
		filepath.Join(root, testRun, EventsFile): 0o600,
	} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v; want %v", p, st.Mode(), want)
		}
	}
	data, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"seq":1,"ts":"2026-11-29T20:15:30.001000000Z","run":"20261129T201530Z-3fa9c1","type":"run.start",` +
		`"body":{"contract_path":"/w/cordon.yaml","contract_digest":"sha256:00","backend":"bwrap","cordon_version":"v0.0.0-test","host":"host","user":"alice","workspace":"/w"},"prev":"","hash":"`
	if !strings.HasPrefix(string(data), want) {
		t.Errorf("first line:\n%s\nwant prefix:\n%s", data, want)
	}
	if _, err := Create(root, testRun, Options{}); !errors.Is(err, ErrRunExists) {
		t.Errorf("second Create: got %v; want ErrRunExists", err)
	}
}

func TestCreateErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, root, id string
		want           error
	}{
		{"root is a file", file, testRun, ErrRootUnwritable},
		{"root under a file", filepath.Join(file, "runs"), testRun, ErrRootUnwritable},
		{"traversal id", t.TempDir(), "../../etc", ErrInvalidRunID},
		{"empty id", t.TempDir(), "", ErrInvalidRunID},
	}
	if os.Geteuid() != 0 { // root ignores permissions
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name, root, id string
			want           error
		}{"read-only root", ro, testRun, ErrRootUnwritable})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Create(tt.root, tt.id, Options{})
			if !errors.Is(err, tt.want) {
				t.Errorf("Create(%q, %q) = %v; want %v", tt.root, tt.id, err, tt.want)
			}
		})
	}
}

func TestWriterConcurrent(t *testing.T) {
	w, _ := newWriter(t, Options{Sync: SyncClose})
	const goroutines, each = 16, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				w.Emit(event.Event{Type: event.NetAllow, Body: netBody{Dest: fmt.Sprintf("h%d:%d", g, i)}})
			}
		})
	}
	wg.Wait()
	if err := w.Close(RunEnd{Reason: ReasonExited}); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if want := goroutines*each + 2; rep.Lines != want || !rep.Sealed || rep.Head != w.Head() {
		t.Errorf("report %+v; want %d lines, sealed, head %s", rep, want, w.Head())
	}
}

func TestWriterRejects(t *testing.T) {
	tests := []struct {
		name string
		ev   event.Event
	}{
		{"no type", event.Event{Body: netBody{}}},
		{"run.start", event.Event{Type: event.RunStart}},
		{"run.end", event.Event{Type: event.RunEnd}},
		{"not an object", event.Event{Type: event.NetAllow, Body: []string{"x"}}},
		{"unencodable", event.Event{Type: event.NetAllow, Body: map[string]any{"f": func() {}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, _ := newWriter(t, Options{})
			if _, err := w.Record(tt.ev); !errors.Is(err, ErrBadEvent) {
				t.Errorf("Record: got %v; want ErrBadEvent", err)
			}
			select {
			case <-w.Failed():
			default:
				t.Error("writer did not fail closed")
			}
			if err := w.Close(RunEnd{}); !errors.Is(err, ErrWriterFailed) {
				t.Errorf("Close: got %v; want ErrWriterFailed", err)
			}
		})
	}
}

// failingFile accepts ok bytes, then writes part of a line and fails like a full disk.
type failingFile struct {
	*os.File
	ok int
}

func (f *failingFile) Write(p []byte) (int, error) {
	if f.ok >= len(p) {
		f.ok -= len(p)
		return f.File.Write(p)
	}
	n, _ := f.File.Write(p[:len(p)/2])
	f.ok = 0
	return n, fmt.Errorf("write: %w", errors.New("no space left on device"))
}

func TestWriterDiskFull(t *testing.T) {
	w, _ := newWriter(t, Options{})
	w.Emit(event.Event{Type: event.NetAllow, Body: netBody{Dest: "a:1"}})
	w.mu.Lock()
	w.f = &failingFile{File: w.f.(*os.File), ok: 0}
	w.mu.Unlock()
	w.Emit(event.Event{Type: event.NetAllow, Body: netBody{Dest: "b:2"}})
	select {
	case <-w.Failed():
	case <-time.After(time.Second):
		t.Fatal("Failed not closed after a failed write")
	}
	if err := w.Err(); err == nil || !strings.Contains(err.Error(), "no space") {
		t.Errorf("Err() = %v", err)
	}
	if _, err := w.Record(event.Event{Type: event.NetAllow, Body: netBody{}}); !errors.Is(err, ErrWriterFailed) {
		t.Errorf("Record after failure: %v; want ErrWriterFailed", err)
	}
	if err := w.Close(RunEnd{}); !errors.Is(err, ErrWriterFailed) {
		t.Errorf("Close: %v; want ErrWriterFailed", err)
	}
	// The partial line was rolled back: the log is whole but unsealed.
	rep, err := Verify(w.Path())
	if !errors.Is(err, ErrTruncated) || rep.Lines != 2 || !strings.Contains(err.Error(), "no run.end") {
		t.Errorf("Verify: %+v, %v; want 2 intact lines, no seal", rep, err)
	}
}

func TestCloseIdempotentAndDrops(t *testing.T) {
	w, _ := newWriter(t, Options{})
	if err := w.Close(RunEnd{Reason: ReasonExited}); err != nil {
		t.Fatal(err)
	}
	w.Emit(event.Event{Type: event.NetDeny, Body: netBody{}})
	if _, err := w.Record(event.Event{Type: event.NetDeny}); !errors.Is(err, ErrClosed) {
		t.Errorf("Record after Close: %v; want ErrClosed", err)
	}
	if err := w.Close(RunEnd{}); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := Verify(w.Path()); err != nil {
		t.Error(err)
	}
}

func TestCmdStartEnvNamesOnly(t *testing.T) {
	w, _ := newWriter(t, Options{})
	cmd, err := w.StartCmd(CmdStart{Argv: []string{"env"}, Env: []string{"TOKEN=hunter2hunter2", "PATH"}})
	if err != nil || cmd != "2" {
		t.Fatalf("StartCmd = %q, %v; want \"2\"", cmd, err)
	}
	if err := w.Close(RunEnd{}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(w.Path())
	if bytes.Contains(data, []byte("hunter2")) || !bytes.Contains(data, []byte(`"env":["TOKEN","PATH"]`)) {
		t.Errorf("log:\n%s", data)
	}
	if !bytes.Contains(data, []byte(`"type":"cmd.start","cmd":"2"`)) {
		t.Errorf("cmd.start does not carry its own id:\n%s", data)
	}
}

func TestNilBodies(t *testing.T) {
	w, _ := newWriter(t, Options{})
	var nb *netBody
	for _, body := range []any{nil, nb} {
		if _, err := w.Record(event.Event{Type: event.NetAllow, Body: body}); err != nil {
			t.Errorf("Record(%#v): %v", body, err)
		}
	}
	if err := w.RecordDiff("1", nil, nil); !errors.Is(err, ErrBadEvent) {
		t.Errorf("RecordDiff(nil) = %v; want ErrBadEvent", err)
	}
}

// TestStartSyncLater: run.start made durable in the background while events are
// written, and a Close that does not wait for it first, leave a whole, verified log.
func TestStartSyncLater(t *testing.T) {
	for _, waitFirst := range []bool{true, false} {
		w, _ := newWriter(t, Options{StartSyncLater: true})
		if waitFirst {
			if err := w.WaitStart(); err != nil {
				t.Fatal(err)
			}
		}
		w.Emit(event.Event{Type: event.NetAllow, Body: netBody{Dest: "h:1"}})
		if err := w.Close(RunEnd{Reason: ReasonExited}); err != nil {
			t.Fatal(err)
		}
		if err := w.WaitStart(); err != nil {
			t.Errorf("WaitStart after Close: %v", err)
		}
		rep, err := Verify(w.Path())
		if err != nil {
			t.Fatal(err)
		}
		if rep.Lines != 3 || !rep.Sealed {
			t.Errorf("report %+v; want 3 lines, sealed", rep)
		}
	}
}

// syncFailingFile fails every fsync.
type syncFailingFile struct{ *os.File }

func (f syncFailingFile) Sync() error { return errors.New("sync: input/output error") }

// TestCmdEndSyncedBeside: cmd.end's fsync runs while the caller computes the diff; the
// next fsync and Synced wait for it, and its failure fails the writer.
func TestCmdEndSyncedBeside(t *testing.T) {
	w, _ := newWriter(t, Options{})
	cmd, err := w.StartCmd(CmdStart{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd, Body: CmdEnd{}})
	if err := w.Synced(); err != nil {
		t.Fatalf("Synced: %v", err)
	}
	w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd, Body: CmdEnd{}})
	if err := w.Close(RunEnd{Reason: ReasonExited}); err != nil { // waits for the second
		t.Fatal(err)
	}
	if rep, err := Verify(w.Path()); err != nil || rep.Lines != 5 {
		t.Errorf("Verify: %+v, %v; want 5 lines", rep, err)
	}

	w, _ = newWriter(t, Options{})
	w.mu.Lock()
	w.f = syncFailingFile{File: w.f.(*os.File)}
	w.mu.Unlock()
	w.Emit(event.Event{Type: event.CmdEnd, Cmd: "2", Body: CmdEnd{}})
	if err := w.Synced(); !errors.Is(err, ErrWriterFailed) {
		t.Errorf("Synced after a failed fsync: %v; want ErrWriterFailed", err)
	}
	select {
	case <-w.Failed():
	default:
		t.Error("Failed not closed after cmd.end's fsync failed")
	}
}

// syncLog is a log file that records, in order, the type of each line written and
// each fsync ("sync").
type syncLog struct {
	*os.File
	mu  sync.Mutex
	ops []string
}

func (f *syncLog) Write(p []byte) (int, error) {
	var r struct{ Type string }
	_ = json.Unmarshal(p, &r)
	f.mu.Lock()
	f.ops = append(f.ops, r.Type)
	f.mu.Unlock()
	return f.File.Write(p)
}

func (f *syncLog) Sync() error {
	f.mu.Lock()
	f.ops = append(f.ops, "sync")
	f.mu.Unlock()
	return f.File.Sync()
}

// TestSyncOneCommand: under SyncOneCommand a run's fs.diff is made durable by the
// seal's fsync, not one of its own; under SyncCommands it has its own. cmd.end's
// (in the background, so in no fixed order with fs.diff's write) is there under both,
// the seal's fsync is last, and the log verifies.
func TestSyncOneCommand(t *testing.T) {
	for _, tc := range []struct {
		policy SyncPolicy
		syncs  int
	}{
		{SyncCommands, 3},
		{SyncOneCommand, 2},
	} {
		w, _ := newWriter(t, Options{Sync: tc.policy})
		f := &syncLog{File: w.f.(*os.File)}
		w.mu.Lock()
		w.f = f
		w.mu.Unlock()
		cmd, err := w.StartCmd(CmdStart{Argv: []string{"true"}})
		if err != nil {
			t.Fatal(err)
		}
		w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd, Body: CmdEnd{}})
		if err := w.RecordDiff(cmd, &fsdiff.Result{}, nil); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(RunEnd{Reason: ReasonExited}); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(f.ops, " ")
		if n := strings.Count(got, "sync"); n != tc.syncs || !strings.HasSuffix(got, "run.end sync") {
			t.Errorf("policy %d: writes and fsyncs %q; want %d fsyncs, the seal's last", tc.policy, got, tc.syncs)
		}
		if rep, err := Verify(w.Path()); err != nil || !rep.Sealed || rep.Lines != 5 {
			t.Errorf("policy %d: Verify: %+v, %v; want 5 lines, sealed", tc.policy, rep, err)
		}
	}
}
