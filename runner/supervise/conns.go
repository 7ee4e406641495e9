package supervise

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/cordonhq/cordon/runner"
	"github.com/cordonhq/cordon/session/wire"
)

// Bounds on what a client of the session's socket can make the supervisor hold. The
// clients are the user's own (the socket is 0600), but a stuck one (a pager left
// alone, a process suspended with ^Z, a script that connects and never writes) must
// not keep the session from stopping, nor stop the socket from being served.
const (
	// maxRequest bounds a request line (a command line, its directory: an argv is at
	// most a few MiB however it is escaped).
	maxRequest = 8 << 20
	// requestWait bounds how long a connection may take to send its request line.
	requestWait = time.Minute
	// drainGrace is how long an exec's client has, once the session stops, to take the
	// rest of its command's output: past it the writes to it fail, so that a client
	// that reads nothing holds up neither its command's end nor the teardown.
	drainGrace = 2 * time.Second
	// acceptBackoffMax bounds the wait between Accepts that failed (out of descriptors).
	acceptBackoffMax = time.Second
)

// accept serves connections until ln is closed (by Server.remove, after the teardown).
// An Accept that fails otherwise (EMFILE: idle connections hold every descriptor) is
// retried after a growing wait, as net/http's server does: the socket stays served
// once descriptors are free again.
func accept(execCtx context.Context, sess *runner.Session, ln net.Listener, st *stops) {
	var wait time.Duration
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			wait = min(max(2*wait, 5*time.Millisecond), acceptBackoffMax)
			time.Sleep(wait)
			continue
		}
		wait = 0
		go serveConn(execCtx, sess, c, st)
	}
}

// readRequest reads c's request line through br, within requestWait and maxRequest.
func readRequest(c net.Conn, br *bufio.Reader) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(requestWait))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }() // stdin follows an exec's request
	return readLine(br)
}

// readLine reads one line of at most maxRequest bytes through br: the supervisor holds
// no more than that of any one request or stdin line.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxRequest {
			return nil, fmt.Errorf("a request line of more than %d bytes", maxRequest)
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// stops are a session's stop requests: the first ends serving; each is answered once
// the session is torn down.
type stops struct {
	requested chan struct{} // closed by the first stop request
	mu        sync.Mutex    // mu guards the fields below.
	stopping  bool
	waiting   []net.Conn
	done      *wire.Frame           // the answer, once the session is torn down
	execs     map[net.Conn]struct{} // the exec connections being served
}

// addExec records c as an exec connection; false once the session is stopping.
func (st *stops) addExec(c net.Conn) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stopping {
		return false
	}
	if st.execs == nil {
		st.execs = map[net.Conn]struct{}{}
	}
	st.execs[c] = struct{}{}
	return true
}

// doneExec forgets the exec connection c.
func (st *stops) doneExec(c net.Conn) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.execs, c)
}

// add takes stop request c: answered at once if the session is torn down, else kept.
func (st *stops) add(c net.Conn) {
	st.mu.Lock()
	if f := st.done; f != nil {
		st.mu.Unlock()
		_ = json.NewEncoder(c).Encode(*f)
		c.Close()
		return
	}
	st.waiting = append(st.waiting, c)
	st.begin()
	st.mu.Unlock()
}

// begin marks the session as stopping, once; the caller holds mu.
func (st *stops) begin() {
	if !st.stopping {
		st.stopping = true
		close(st.requested)
	}
}

// stop marks the session as stopping (requests other than stop are refused) and gives
// every exec's client drainGrace to take the rest of its output.
func (st *stops) stop() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.begin()
	deadline := time.Now().Add(drainGrace)
	for c := range st.execs {
		_ = c.SetWriteDeadline(deadline)
	}
}

// isStopping says whether the session is being torn down.
func (st *stops) isStopping() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stopping
}

// answer answers every stop request kept, and any later one, with f.
func (st *stops) answer(f wire.Frame) {
	st.mu.Lock()
	st.done = &f
	waiting := st.waiting
	st.waiting = nil
	st.mu.Unlock()
	for _, c := range waiting {
		_ = json.NewEncoder(c).Encode(f)
		c.Close()
	}
}
