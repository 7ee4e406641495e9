package egress

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// spliceCopy moves bytes from src's socket to dst's socket through a kernel pipe, so they
// never enter the proxy's memory: until src's end when limit is negative (then a clean end
// is a nil error), or exactly limit bytes (an end before them is io.ErrUnexpectedEOF). It
// keeps idleConn's rules: every wait is bounded by the idle timeout (and src's hard
// deadline), a read that timed out is retried while the tunnel's other direction moved,
// and the bytes are counted on both conns.
//
// handled is false, with nothing moved, when either side is not a TCP or unix stream
// socket or no pipe could be made; the caller then copies through user memory.
func spliceCopy(dst, src *idleConn, limit int64) (n int64, handled bool, err error) {
	var pc pipeCache
	defer pc.close()
	return spliceVia(&pc, dst, src, limit)
}

// spliced counts the bytes every splice has moved since the process started; tests read it
// to know that a transfer took the kernel path and not the copy through user memory.
var spliced atomic.Int64

// pipeCache keeps one splice pipe across calls of spliceVia (a pipe is three system
// calls to make and close). The zero value is empty; close releases the pipe.
type pipeCache struct{ p *linux.Pipe }

func (c *pipeCache) close() {
	if c.p != nil {
		c.p.Close()
		c.p = nil
	}
}

// spliceVia is spliceCopy through the pipe in pc, made on first use. A pipe that may
// still hold bytes after an error is closed, never reused.
func spliceVia(pc *pipeCache, dst, src *idleConn, limit int64) (n int64, handled bool, err error) {
	rs, ws := rawSocket(src.Conn), rawSocket(dst.Conn)
	if rs == nil || ws == nil || limit == 0 {
		return 0, limit == 0, nil
	}
	if pc.p == nil {
		if pc.p, err = linux.NewPipe(); err != nil {
			return 0, false, nil
		}
		// Once per tunnel direction or spliced body: see linux.SpliceSendBuffer.
		linux.WidenSendBuffer(ws)
	}
	p := pc.p
	defer func() {
		if err != nil {
			pc.close()
		}
	}()
	for limit < 0 || n < limit {
		want := linux.PipeSize
		if limit >= 0 && limit-n < int64(want) {
			want = int(limit - n)
		}
		m, err := src.fillPipe(p, rs, want)
		if errors.Is(err, io.EOF) {
			if limit >= 0 {
				return n, true, io.ErrUnexpectedEOF
			}
			return n, true, nil
		}
		if err != nil {
			return n, true, err
		}
		if err := dst.drainPipe(p, ws, m); err != nil {
			return n, true, err
		}
		n += int64(m)
		spliced.Add(int64(m))
	}
	return n, true, nil
}

// rawSocket returns c's raw connection when c is a TCP or unix stream socket, or nil.
func rawSocket(c net.Conn) syscall.RawConn {
	switch c := c.(type) {
	case *net.TCPConn:
	case *net.UnixConn:
		if c.LocalAddr().Network() != "unix" {
			return nil
		}
	default:
		return nil
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// fillPipe is Read's deadline rule for a splice from c into p.
func (c *idleConn) fillPipe(p *linux.Pipe, raw syscall.RawConn, max int) (int, error) {
	for {
		deadline := time.Now().Add(c.idle)
		if !c.hard.IsZero() && c.hard.Before(deadline) {
			deadline = c.hard
		}
		if err := c.Conn.SetReadDeadline(deadline); err != nil {
			return 0, err
		}
		n, err := p.Fill(raw, max)
		c.nread.Add(int64(n))
		if n > 0 && c.act != nil {
			c.act.touch()
		}
		if n == 0 && err != nil && c.hard.IsZero() && c.act.recent(c.idle) && isTimeout(err) {
			continue
		}
		return n, err
	}
}

// drainPipe is Write's deadline rule for a splice of the n bytes in p to c.
func (c *idleConn) drainPipe(p *linux.Pipe, raw syscall.RawConn, n int) error {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
		return err
	}
	if err := p.Drain(raw); err != nil {
		return err
	}
	c.nwritten.Add(int64(n))
	if c.act != nil {
		c.act.touch()
	}
	return nil
}
