package egress

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// upstreamReadBuf is the size of the transport's read buffer on each upstream connection
// (http.Transport.ReadBufferSize): at most this many bytes of a response body can sit in
// user memory, so a splice of the rest can never reach past the body.
const upstreamReadBuf = 4 << 10

// bigBufPool holds the buffers a spliced response body is read through. Their size is
// only the most one Read may splice: the transport writes into them only the few bytes
// it had buffered.
var bigBufPool = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// bodySplice lets the relay of one Content-Length response body move it from the upstream
// socket to the client socket with splice(2) while http.Transport still frames it, so the
// connection is reused or closed exactly as before.
//
// It is armed on the upstream idleConn. While armed with a budget, the next Read of that
// conn (the transport reading the body into the relay's buffer, bypassing its own empty
// read buffer because the relay's buffer is larger) splices up to budget bytes to the
// client instead, and returns their count with the buffer untouched; the relay learns
// from spliced that those bytes are delivered. The budget is always smaller than the
// body bytes still in the socket, so no byte of a later response is ever spliced, even
// by the transport's read loop peeking after the body's end. Any other pattern of reads
// than this is detected (spliced differs from what Read returned) and fails the relay.
type bodySplice struct {
	dst     *idleConn    // the client
	budget  atomic.Int64 // bytes the next upstream Read may splice; 0 when disarmed
	spliced atomic.Int64 // bytes the last armed Read spliced
	pipes   pipeCache    // used only by the armed Read, which runs in the relay's goroutine
}

// read is the armed upstream conn's Read; ok is false when it did nothing (no budget,
// or the sockets cannot splice) and the Read goes on as usual.
func (s *bodySplice) read(src *idleConn, b []byte) (int, bool, error) {
	k := min(s.budget.Swap(0), int64(len(b)))
	if k <= 0 {
		return 0, false, nil
	}
	n, handled, err := spliceVia(&s.pipes, s.dst, src, k)
	if !handled {
		return 0, false, nil
	}
	s.spliced.Store(n)
	return int(n), true, err
}

// relaySpliced relays a response body of resp.ContentLength bytes to the client cc,
// splicing all but the bytes the transport had already read, and returns the body bytes
// relayed. bw must be cc's writer; it is flushed first.
func relaySpliced(bw *bufio.Writer, cc, up *idleConn, body io.Reader, length int64) (int64, error) {
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	s := &bodySplice{dst: cc}
	defer s.pipes.close() // runs last: no Read can use the pipe once disarmed
	up.splice.Store(s)
	defer up.splice.Store(nil)
	bp := bigBufPool.Get().(*[]byte)
	defer bigBufPool.Put(bp)
	buf := *bp
	var total int64
	for {
		if safe := length - total - upstreamReadBuf; safe > 0 {
			s.budget.Store(min(safe, int64(len(buf))))
		}
		n, err := body.Read(buf)
		s.budget.Store(0)
		switch k := s.spliced.Swap(0); {
		case k == 0 && n > 0:
			if _, werr := cc.Write(buf[:n]); werr != nil {
				return total, werr
			}
		case k != int64(n):
			return total + k, fmt.Errorf("spliced %d bytes but the transport read %d", k, n)
		}
		total += int64(n)
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// spliceable reports whether a response body can be relayed by relaySpliced: framed by
// a Content-Length longer than the transport's read buffer, with no transfer coding.
func spliceable(resp *http.Response, up *idleConn) bool {
	return up != nil && resp.ContentLength > 2*upstreamReadBuf && len(resp.TransferEncoding) == 0 && !resp.Uncompressed
}
