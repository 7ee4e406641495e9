package egress

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// idleConn bounds every Read and Write of a connection with a deadline, so no peer can
// hold a goroutine forever by going silent or by not reading. Outside tunnels a timeout is
// an error. In a tunnel the two connections share an activity clock, and a read that timed
// out is retried while the other direction moved within the idle timeout: a long download
// with a silent upload direction is not idle.
//
// It also counts the bytes read and written, for events.
type idleConn struct {
	net.Conn
	idle time.Duration
	act  *activity // shared by both ends of a tunnel; nil outside tunnels

	// hard is an absolute read deadline (zero for none) used while reading a handshake.
	// Only the reading goroutine touches it.
	hard time.Time

	nread, nwritten atomic.Int64

	// splice, when set on an upstream conn, relays a response body kernel to kernel
	// (see bodySplice); it may be read by the transport's read loop, hence atomic.
	splice atomic.Pointer[bodySplice]
}

func newIdleConn(c net.Conn, idle time.Duration) *idleConn {
	return &idleConn{Conn: c, idle: idle}
}

// setHard sets an absolute read deadline that idle extensions cannot pass; zero clears it.
func (c *idleConn) setHard(t time.Time) { c.hard = t }

func (c *idleConn) Read(b []byte) (int, error) {
	if s := c.splice.Load(); s != nil {
		if n, ok, err := s.read(c, b); ok {
			return n, err
		}
	}
	for {
		deadline := time.Now().Add(c.idle)
		if !c.hard.IsZero() && c.hard.Before(deadline) {
			deadline = c.hard
		}
		if err := c.Conn.SetReadDeadline(deadline); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(b)
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

func (c *idleConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	n, err := c.Conn.Write(b)
	c.nwritten.Add(int64(n))
	if n > 0 && c.act != nil {
		c.act.touch()
	}
	return n, err
}

// ReadFrom copies r to the connection until r's end through a pooled 256 KiB buffer, each
// write under Write's deadline rule. http.Transport hands its upstream connection to
// io.Copy for a request body (its persistConnWriter.ReadFrom), and without this method
// io.Copy would move a plain-HTTP upload 32 KiB at a time.
func (c *idleConn) ReadFrom(r io.Reader) (int64, error) {
	bp := uploadBufPool.Get().(*[]byte)
	defer uploadBufPool.Put(bp)
	return io.CopyBuffer(writerOnly{c}, r, *bp)
}

// writerOnly hides every method but Write, so io.CopyBuffer cannot call ReadFrom again.
type writerOnly struct{ io.Writer }

// uploadBufPool holds the buffers of idleConn.ReadFrom: a read from the client's body
// into one fills it in a single system call when the client sent that much (its reader's
// buffer, maxHead, is smaller, so the read bypasses it).
var uploadBufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// CloseWrite half-closes the connection when the transport supports it (TCP and unix
// sockets do), and closes it otherwise.
func (c *idleConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// activity is the time of the last byte moved in either direction of a tunnel.
type activity struct {
	start time.Time
	last  atomic.Int64 // nanoseconds since start
}

func newActivity() *activity { return &activity{start: time.Now()} }

func (a *activity) touch() { a.last.Store(int64(time.Since(a.start))) }

// recent reports whether a byte moved within d; false for a nil activity.
func (a *activity) recent(d time.Duration) bool {
	if a == nil {
		return false
	}
	return time.Since(a.start)-time.Duration(a.last.Load()) < d
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// bufPool holds the fixed 32 KiB buffers that tunnels copy through; nothing is ever
// buffered beyond them.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// tunnel relays bytes both ways between the client (read through clientR, which may hold
// bytes the client sent already) and the upstream, half-closing each direction when the
// other side finishes sending, until both directions are done or one fails. It returns the
// first error other than a clean end of stream.
func tunnel(client *idleConn, clientR io.Reader, up *idleConn) error {
	act := newActivity()
	client.act, up.act = act, act
	down := make(chan error, 1)
	go func() { down <- pipe(client, up) }()
	errUp := pipe(up, clientR)
	if errUp != nil {
		client.Close()
		up.Close()
	}
	errDown := <-down
	if errDown != nil {
		client.Close()
		up.Close()
	}
	return errors.Join(errUp, errDown)
}

// pipe copies src to dst, then half-closes dst. When src can hand over its socket (see
// [spliceSource]) the bytes move kernel to kernel with splice(2); otherwise, and on other
// systems, through a pooled buffer.
func pipe(dst *idleConn, src io.Reader) error {
	if err := copyStream(dst, src); err != nil {
		return err
	}
	if cerr := dst.CloseWrite(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
		return cerr
	}
	return nil
}

// spliceSource is a tunnel source that can hand over its socket: it first writes to dst
// whatever it holds in user memory, then returns the conn the rest is read from.
type spliceSource interface {
	spliceSource(dst *idleConn) (*idleConn, error)
}

// spliceSource implements spliceSource: an idleConn holds nothing.
func (c *idleConn) spliceSource(*idleConn) (*idleConn, error) { return c, nil }

// copyStream copies src to dst until src's end.
func copyStream(dst *idleConn, src io.Reader) error {
	if ss, ok := src.(spliceSource); ok {
		raw, err := ss.spliceSource(dst)
		if errors.Is(err, io.EOF) {
			return nil // the client sent nothing and closed
		}
		if err != nil {
			return err
		}
		if _, handled, err := spliceCopy(dst, raw, -1); handled {
			return err
		}
	}
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// lingerClose half-closes c and discards what the client still sends, for at most a
// second and 64 KiB, before closing. Closing a socket with unread data makes the kernel
// send a reset, which can destroy the 403 or 503 the client has not read yet.
func lingerClose(c *idleConn) {
	_ = c.CloseWrite()
	c.setHard(time.Now().Add(time.Second))
	_, _ = io.CopyN(io.Discard, c, 64<<10)
	c.Close()
}
