package runner

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"
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
