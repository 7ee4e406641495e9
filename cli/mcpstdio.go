//go:build !noengines || !linux

package cli

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// mcpOutputStall is how long, once its input has ended, cordon mcp waits on a write to
// its stdout that does not return before it stops the session anyway: a client that
// closed its end of stdin and never reads the answers would otherwise keep the session
// (and its sandbox) up for as long as it lives.
var mcpOutputStall = 10 * time.Second

// eofReader is r that closes ended once a read of it returns an error (its end, or a
// failure): the client sends nothing more.
type eofReader struct {
	r     io.Reader
	once  sync.Once
	ended chan struct{}
}

func newEOFReader(r io.Reader) *eofReader { return &eofReader{r: r, ended: make(chan struct{})} }

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.once.Do(func() { close(e.ended) })
	}
	return n, err
}

// stallWriter is w that tells how long its write in progress, if any, has been
// blocked.
type stallWriter struct {
	w     io.Writer
	since atomic.Int64 // when the write in progress began (unix ns); 0 between writes
}

func (s *stallWriter) Write(p []byte) (int, error) {
	s.since.Store(time.Now().UnixNano())
	defer s.since.Store(0)
	return s.w.Write(p)
}

// stalled closes the channel it returns once a write has been blocked for stall, or
// when done is closed (then without a stall).
func (s *stallWriter) stalled(stall time.Duration, done <-chan struct{}) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		t := time.NewTicker(stall / 10)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if b := s.since.Load(); b != 0 && time.Since(time.Unix(0, b)) >= stall {
					close(c)
					return
				}
			}
		}
	}()
	return c
}
