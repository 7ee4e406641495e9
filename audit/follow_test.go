package audit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// TestFollowStreamsALiveLog follows a log while a real Writer appends to it: every line
// arrives, in order, and Follow returns at the seal with the same head Verify finds.
func TestFollowStreamsALiveLog(t *testing.T) {
	w, _ := newWriter(t, Options{})
	got := make(chan []byte, 100)
	var live atomic.Bool
	live.Store(true)
	done := make(chan error, 1)
	var rep Report
	go func() {
		var err error
		rep, err = Follow(context.Background(), w.Path(), FollowOptions{Live: live.Load, Poll: time.Millisecond},
			func(line []byte, rec Record) error {
				got <- append([]byte(nil), line...)
				return nil
			})
		done <- err
	}()
	first := <-got // run.start, before anything else is written
	cmd, err := w.StartCmd(CmdStart{Argv: []string{"make"}, Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	w.Emit(event.Event{Type: event.CmdEnd, Cmd: cmd, Body: CmdEnd{ExitCode: 0}})
	if err := w.Close(RunEnd{Reason: ReasonExited}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || !rep.Sealed || rep.Lines != 4 {
		t.Fatalf("Follow = %+v, %v; want sealed after 4 lines", rep, err)
	}
	close(got)
	var all bytes.Buffer
	all.Write(append(first, '\n'))
	for line := range got {
		all.Write(append(line, '\n'))
	}
	if data, _ := os.ReadFile(w.Path()); !bytes.Equal(all.Bytes(), data) {
		t.Errorf("followed lines differ from the log:\n%s\nlog:\n%s", all.Bytes(), data)
	}
	vrep, err := Verify(w.Path())
	if err != nil || vrep.Head != rep.Head {
		t.Errorf("Verify head %s, Follow head %s (%v)", vrep.Head, rep.Head, err)
	}
}

// TestFollowStopsAtBadLineOrDeadRun: a line that does not verify is never handed on,
// and a log whose run is gone without a seal ends as truncated.
func TestFollowStopsAtBadLineOrDeadRun(t *testing.T) {
	path := writeSampleRun(t)
	orig, _ := os.ReadFile(path)
	tampered := bytes.Replace(orig, []byte(`"make"`), []byte(`"mako"`), 1)
	if err := os.WriteFile(path, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	n := 0
	_, err := Follow(context.Background(), path, FollowOptions{}, func([]byte, Record) error { n++; return nil })
	if !errors.Is(err, ErrEdited) || n != 1 {
		t.Errorf("edited log: %v after %d lines; want ErrEdited after run.start only", err, n)
	}
	unsealed := orig[:bytes.LastIndex(bytes.TrimSuffix(orig, []byte("\n")), []byte("\n"))+1]
	if err := os.WriteFile(path, unsealed, 0o600); err != nil {
		t.Fatal(err)
	}
	n = 0
	_, err = Follow(context.Background(), path, FollowOptions{Live: func() bool { return false }}, func([]byte, Record) error { n++; return nil })
	if !errors.Is(err, ErrTruncated) || n != bytes.Count(unsealed, []byte("\n")) {
		t.Errorf("unsealed log of a dead run: %v after %d lines", err, n)
	}
}
