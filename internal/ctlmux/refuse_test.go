package ctlmux

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// The relay's refusals of frames a correct peer never sends, and its bounds.

// Frames a correct host never sends end the pod's relay.
func TestPodRefusesBadConnFrames(t *testing.T) {
	credit := func(id uint64, n uint32) []byte {
		return append(header(kindConnCredit, id, 4), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	for name, f := range map[string][]byte{
		"open from host":    append(header(kindConnOpen, 1, 1), portEgress),
		"data, unknown id":  append(header(kindConnData, 1, 1), 'x'),
		"empty data":        header(kindConnData, 1, 0),
		"eof, unknown id":   header(kindConnEOF, 1, 0),
		"close, unknown id": header(kindConnClose, 1, 0),
		"credit unknown id": credit(1, 1),
		"short credit":      append(header(kindConnCredit, 1, 2), 0, 1),
		"eof with payload":  append(header(kindConnEOF, 1, 1), 0),
		"huge conn data":    header(kindConnData, 1, maxData+1),
	} {
		t.Run(name, func(t *testing.T) {
			podEnd, initEnd := pair(t)
			done := make(chan error, 1)
			go func() { done <- Pod(podEnd, bytes.NewReader(f), io.Discard) }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Pod accepted the frame")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Pod still runs")
			}
			if _, _, err := initEnd.Recv(); err == nil {
				t.Error("process 1's connection is still open")
			}
		})
	}
}

// Frames a correct pod never sends end the host's relay, which closes its listener.
func TestHostRefusesBadConnFrames(t *testing.T) {
	open := func(id uint64) []byte { return append(header(kindConnOpen, id, 1), portEgress) }
	openGate := func(id uint64) []byte { return append(header(kindConnOpen, id, 1), portGate) }
	data := func(id uint64, n int) []byte {
		var b []byte
		for n > 0 {
			k := min(n, maxData)
			b = append(append(b, header(kindConnData, id, uint32(k))...), make([]byte, k)...)
			n -= k
		}
		return b
	}
	credit := func(id uint64, n uint32) []byte {
		return append(header(kindConnCredit, id, 4), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	for name, tc := range map[string]struct {
		stream   []byte
		noEgress bool
		noGate   bool
	}{
		"open without egress": {stream: open(1), noEgress: true},
		"open out of order":   {stream: slicesConcat(open(2), open(1))},
		"open twice":          {stream: slicesConcat(open(1), open(1))},
		"data, unknown id":    {stream: data(1, 1)},
		// Past what the host's window and the unread socket pair can hold.
		"data past the window": {stream: slicesConcat(open(1), data(1, 16*connWindow))},
		"data after its end":   {stream: slicesConcat(open(1), header(kindConnEOF, 1, 0), data(1, 1))},
		"eof twice":            {stream: slicesConcat(open(1), header(kindConnEOF, 1, 0), header(kindConnEOF, 1, 0))},
		"credit past window":   {stream: slicesConcat(open(1), credit(1, 1))},
		"zero credit":          {stream: slicesConcat(open(1), credit(1, 0))},
		"after its close":      {stream: slicesConcat(open(1), header(kindConnClose, 1, 0), header(kindConnEOF, 1, 0))},
		"too many":             {stream: manyOpens(MaxConns+1, portEgress)},
		"open without a port":  {stream: header(kindConnOpen, 1, 0)},
		"open on port 0":       {stream: append(header(kindConnOpen, 1, 1), 0)},
		"open on port 3":       {stream: append(header(kindConnOpen, 1, 1), 3)},
		"open with 2 bytes":    {stream: append(header(kindConnOpen, 1, 2), portEgress, 0)},
		"gate without gates":   {stream: openGate(1), noGate: true},
		"too many gate conns":  {stream: manyOpens(MaxGateConns+1, portGate)},
		"gate id out of order": {stream: slicesConcat(open(2), openGate(1))},
	} {
		t.Run(name, func(t *testing.T) {
			_, hostEnd := pair(t)
			var ls Listeners
			if !tc.noEgress {
				ls.Egress = NewListener()
			}
			if !tc.noGate {
				ls.Gate = NewGateListener()
			}
			for _, ln := range []*Listener{ls.Egress, ls.Gate} {
				if ln == nil {
					continue
				}
				go func() { // the service: takes every connection, reads nothing
					for {
						if _, err := ln.Accept(); err != nil {
							return
						}
					}
				}()
			}
			// The stream stays open after the frames: only the refusal ends Host.
			pr, pw := io.Pipe()
			go func() { pw.Write(tc.stream) }()
			t.Cleanup(func() { pw.Close() })
			done := make(chan error, 1)
			go func() { done <- Host(hostEnd, rwc{pr, discardPipe()}, ls) }()
			select {
			case err := <-done:
				if !errors.Is(err, ErrProtocol) {
					t.Fatalf("Host returned %v, want ErrProtocol", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Host still runs")
			}
			for _, ln := range []*Listener{ls.Egress, ls.Gate} {
				if ln == nil {
					continue
				}
				if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
					t.Errorf("the %v listener is still open: %v", ln.Addr(), err)
				}
			}
		})
	}
}

// Each port's bound of opens is within bounds, both at once: the tests of one more
// need them all to be, and the two bounds are apart.
func TestHostTakesMaxConns(t *testing.T) {
	_, hostEnd := pair(t)
	ls := Listeners{Egress: NewListener(), Gate: NewGateListener()}
	pr, pw := io.Pipe()
	go func() {
		pw.Write(manyOpens(MaxConns, portEgress))
		var b []byte
		for i := range MaxGateConns {
			b = append(append(b, header(kindConnOpen, uint64(MaxConns+i+1), 1)...), portGate)
		}
		pw.Write(b)
	}()
	done := make(chan error, 1)
	go func() { done <- Host(hostEnd, rwc{pr, discardPipe()}, ls) }()
	for _, tc := range []struct {
		ln *Listener
		n  int
	}{{ls.Egress, MaxConns}, {ls.Gate, MaxGateConns}} {
		for i := range tc.n {
			if c := acceptWithin(t, tc.ln, 5*time.Second); c == nil {
				t.Fatalf("%v: connection %d did not arrive", tc.ln.Addr(), i+1)
			} else {
				defer c.Close()
			}
		}
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatalf("Host: %v", err)
	}
}

func manyOpens(n int, port byte) []byte {
	var b []byte
	for i := range n {
		b = append(append(b, header(kindConnOpen, uint64(i+1), 1)...), port)
	}
	return b
}

func slicesConcat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// discardPipe is a writer that takes everything, as a stream the pod reads.
func discardPipe() *io.PipeWriter {
	r, w := io.Pipe()
	go io.Copy(io.Discard, r)
	return w
}
