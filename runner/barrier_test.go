package runner

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

func hurried(b *barrier) bool {
	select {
	case <-b.hurry:
		return true
	default:
		return false
	}
}

// The baseline is paced until something waits for it: cordon's copy of the command's
// output (which then waits for the release), the command's end when the run does
// not skip the baseline, or the barrier given up. Until then nothing hurries it.
func TestBarrierHurriesWhenWaitedFor(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	t.Run("gated output", func(t *testing.T) {
		b := newBarrier(log)
		var buf bytes.Buffer
		g := b.gate(&buf)
		if hurried(b) {
			t.Fatal("a new barrier hurries its baseline")
		}
		wrote := make(chan struct{})
		go func() {
			defer close(wrote)
			g.Write([]byte("hi"))
		}()
		select {
		case <-b.hurry:
		case <-time.After(time.Minute):
			t.Fatal("output waiting for the baseline did not hurry it")
		}
		select {
		case <-wrote:
			t.Fatal("the output was copied before the barrier's release")
		default:
		}
		b.release()
		<-wrote
		if buf.String() != "hi" {
			t.Errorf("copied %q", buf.String())
		}
	})
	t.Run("shut", func(t *testing.T) {
		b := newBarrier(log)
		b.shut()
		if !hurried(b) {
			t.Error("a shut barrier leaves its baseline paced")
		}
	})
	t.Run("end", func(t *testing.T) {
		for _, err := range []error{nil, errors.New("failed")} {
			r := &run{o: &Options{Log: log}, bar: newBarrier(log)}
			if r.barrierEnd(err, func() { t.Error("skipped the baseline with no listener taken") }) {
				t.Error("barrierEnd skipped")
			}
			if !hurried(r.bar) {
				t.Errorf("the command's end (%v) left the baseline paced", err)
			}
		}
	})
}

// Output copied to an anonymous pipe is not held (what lands from there in the
// workspace is a host process's doing); to a regular file, a named pipe or a device
// node (whose times a write moves), or a writer that is not a file, it is.
func TestBarrierGatesOnlyWhatMayLand(t *testing.T) {
	b := newBarrier(slog.New(slog.DiscardHandler))
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	file, err := os.Create(filepath.Join(t.TempDir(), "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	fifoPath := filepath.Join(t.TempDir(), "out.fifo")
	if err := linux.Mkfifo(fifoPath, 0o600); err != nil {
		t.Fatal(err)
	}
	fifo, err := os.OpenFile(fifoPath, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fifo.Close()
	var buf bytes.Buffer
	for _, tc := range []struct {
		name  string
		dst   io.Writer
		gated bool
	}{{"pipe", pw, false}, {"/dev/null", null, true}, {"named pipe", fifo, true}, {"regular file", file, true}, {"not a file", &buf, true}} {
		_, gated := b.gateFor(tc.dst, tc.dst).(*gatedWriter)
		if gated != tc.gated {
			t.Errorf("output to a %s: gated %v, want %v", tc.name, gated, tc.gated)
		}
	}
}
