package runner

import (
	"errors"
	"log/slog"
	"net"
	"testing"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// closeCounter is a listener that only counts its closes.
type closeCounter struct {
	net.Listener
	closes int
}

func (l *closeCounter) Close() error { l.closes++; return nil }

// A relayed gate listener is taken once, and only in a run with gates; a listener for
// a service nobody serves is refused. Each refused listener is closed.
func TestServeRelayedGate(t *testing.T) {
	r := &run{o: &Options{Log: slog.New(slog.DiscardHandler)}}
	for name, svc := range map[string]sandbox.Relayed{"a gate without gates": sandbox.RelayedGate, "an unknown service": 7} {
		ln := &closeCounter{}
		if err := r.serveRelayed(svc, ln); !errors.Is(err, errdefs.ErrSandbox) || ln.closes != 1 {
			t.Errorf("%s: %v, closed %d times; want ErrSandbox and the listener closed", name, err, ln.closes)
		}
	}
	r.gates = &gates{relayed: make(chan net.Listener, 1)}
	first := &closeCounter{}
	if err := r.serveRelayed(sandbox.RelayedGate, first); err != nil || first.closes != 0 {
		t.Fatalf("the gate listener: %v, closed %d times", err, first.closes)
	}
	if got := <-r.gates.relayed; got != first {
		t.Fatal("the gate service was not given the listener")
	}
	second := &closeCounter{}
	if err := r.serveRelayed(sandbox.RelayedGate, second); !errors.Is(err, errdefs.ErrSandbox) || second.closes != 1 {
		t.Errorf("a second gate listener: %v, closed %d times; want it refused and closed", err, second.closes)
	}
}
