package ctlmux

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
)

// Relayed connections. A command's connection to one of cordon's services in the Pod
// (the proxy address, the gate socket) is accepted by [Pod] on the listener process 1
// handed over for it and relayed over the stream to [Host], which hands it to the
// service as a [net.Conn] on that service's [Listener]:
//
//   - kindConnOpen, pod → host, opens connection id (ids strictly increase, whatever
//     the port) on the port its one byte of payload names (portEgress, portGate);
//   - kindConnData, both ways, carries its bytes, never more than the receiver's
//     window allows;
//   - kindConnCredit, both ways, gives the peer back that many bytes of window: the
//     sender wrote them out to its local end;
//   - kindConnEOF, both ways, ends the sender's direction (a half-close);
//   - kindConnClose, both ways, is the sender's last frame for the id: it is done with
//     the connection (both directions ended, or torn down: a close before the sender's
//     EOF is a reset). Each side forgets an id once it has sent and received a close,
//     so both agree on which ids are open, and a frame for an id that is not open is a
//     protocol error.
//
// The stream's reader never blocks on a connection: data is queued (at most the
// window) and written out by the connection's own goroutine, so a command that does
// not read stalls only its own connection, never the stream.

// Ports: what a relayed connection was made to in the Pod (an open frame's payload).
const (
	portEgress byte = 1 // the proxy address, [ProxyAddr]
	portGate   byte = 2 // the gate socket, [GateSocket]
)

func validPort(p byte) bool { return p == portEgress || p == portGate }

func portName(p byte) string {
	if p == portGate {
		return "gate"
	}
	return "egress"
}

// MaxConns bounds the egress connections open at once on one stream: the pod closes
// a connection accepted past it at once, and the host refuses the stream that opens
// one past it.
const MaxConns = 128

// MaxGateConns bounds the gate connections open at once on one stream, as MaxConns
// bounds the egress ones, and apart from them: a command holding gate requests open
// (each waits for a person) takes nothing from the egress connections, nor they from
// it.
const MaxGateConns = 16

// maxConnsOf is port's bound.
func maxConnsOf(port byte) int {
	if port == portGate {
		return MaxGateConns
	}
	return MaxConns
}

// connWindow is each connection's window, each way: the bytes sent and not yet
// written out at the other end. The memory held per stream is bounded by MaxConns
// windows each way (and MaxGateConns more).
const connWindow = 256 << 10

// halfConn is the local end of a relayed connection.
type halfConn interface {
	net.Conn
	CloseRead() error
	CloseWrite() error
}

// conns is one side's relayed connections.
type conns struct {
	w *writer

	mu    sync.Mutex // mu guards the fields below and every relayConn's state.
	live  map[uint64]*relayConn
	open  [portGate + 1]int // the live connections of each port
	last  uint64            // the highest id opened
	ended bool              // the stream is over: nothing more is opened
}

func newConns(w *writer) *conns {
	return &conns{w: w, live: map[uint64]*relayConn{}}
}

// relayConn is one relayed connection. Its fields are guarded by conns.mu.
type relayConn struct {
	m     *conns
	id    uint64
	port  byte
	local halfConn   // nil when none could be made (then aborted from the start)
	cond  *sync.Cond // on m.mu: credit, queue or state changed

	credit     int      // bytes it may still send
	queue      [][]byte // received, to be written out
	queued     int      // bytes received and not yet credited back
	peerEOF    bool     // the peer's direction ended
	peerClosed bool     // the peer's close came
	aborted    bool     // torn down here: the local end is closed
	sentClose  bool
}

// full reports whether port has all the connections it may have open (m.mu held).
func (m *conns) full(port byte) bool { return m.open[port] >= maxConnsOf(port) }

// add registers connection id on port (m.mu held). The caller starts it.
func (m *conns) add(id uint64, port byte, local halfConn) *relayConn {
	c := &relayConn{m: m, id: id, port: port, local: local, cond: sync.NewCond(&m.mu), credit: connWindow}
	if local == nil {
		c.aborted = true
	}
	m.live[id] = c
	m.open[port]++
	m.last = id
	return c
}

// forget drops c once both sides are done with it (m.mu held).
func (m *conns) forget(c *relayConn) {
	if m.live[c.id] == c {
		delete(m.live, c.id)
		m.open[c.port]--
	}
}

// start relays c until both directions are over, then sends its close.
func (c *relayConn) start() {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.up() }()
	go func() { defer wg.Done(); c.down() }()
	go func() { wg.Wait(); c.finish() }()
}

// up sends what the local end reads, within the window, then its end.
func (c *relayConn) up() {
	buf := make([]byte, maxData)
	for {
		c.m.mu.Lock()
		for c.credit == 0 && !c.upStopped() {
			c.cond.Wait()
		}
		if c.upStopped() {
			c.m.mu.Unlock()
			return
		}
		n := min(c.credit, maxData)
		c.m.mu.Unlock()
		k, err := c.local.Read(buf[:n])
		c.m.mu.Lock()
		stopped := c.upStopped()
		c.credit -= k
		c.m.mu.Unlock()
		switch {
		case stopped:
			return
		case k > 0 && c.m.w.frame(kindConnData, c.id, buf[:k]) != nil:
			c.abort()
			return
		case err == io.EOF:
			if c.m.w.frame(kindConnEOF, c.id, nil) != nil {
				c.abort()
			}
			return
		case err != nil:
			c.abort()
			return
		}
	}
}

// upStopped: nothing more is to be sent (m.mu held).
func (c *relayConn) upStopped() bool { return c.aborted || c.peerClosed }

// down writes the queued bytes to the local end and gives their window back; at the
// peer's end it half-closes the local end.
func (c *relayConn) down() {
	for {
		c.m.mu.Lock()
		for len(c.queue) == 0 && !c.peerEOF && !c.aborted {
			c.cond.Wait()
		}
		if c.aborted {
			c.m.mu.Unlock()
			return
		}
		if len(c.queue) == 0 { // the peer's end, everything written
			c.m.mu.Unlock()
			_ = c.local.CloseWrite()
			return
		}
		bufs := net.Buffers(c.queue)
		c.queue = nil
		c.m.mu.Unlock()
		n, err := bufs.WriteTo(c.local)
		if err != nil {
			c.abort()
			return
		}
		c.m.mu.Lock()
		c.queued -= int(n)
		more := !c.peerEOF && !c.peerClosed // else the peer sends no more data
		c.m.mu.Unlock()
		if more {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(n))
			if c.m.w.frame(kindConnCredit, c.id, b[:]) != nil {
				c.abort()
				return
			}
		}
	}
}

// abort tears the connection down here: the local end is closed (a TCP connection
// with a reset), queued bytes are dropped.
func (c *relayConn) abort() {
	c.m.mu.Lock()
	if c.aborted {
		c.m.mu.Unlock()
		return
	}
	c.aborted = true
	c.queue = nil
	c.cond.Broadcast()
	c.m.mu.Unlock()
	if l, ok := c.local.(interface{ SetLinger(int) error }); ok {
		_ = l.SetLinger(0)
	}
	c.local.Close()
}

// finish, once both directions are over, closes the local end and sends the close;
// the id is forgotten once the peer's close has come too.
func (c *relayConn) finish() {
	if c.local != nil {
		c.local.Close()
	}
	err := c.m.w.frame(kindConnClose, c.id, nil)
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.sentClose = true
	if c.peerClosed || err != nil {
		c.m.forget(c)
	}
}

// handle takes a frame for an open connection (any kind but kindConnOpen). It never
// blocks.
func (m *conns) handle(f frame) error {
	m.mu.Lock()
	c := m.live[f.id]
	if c == nil {
		m.mu.Unlock()
		return fmt.Errorf("%w: a frame of kind %d for connection %d, which is not open", ErrProtocol, f.kind, f.id)
	}
	if c.peerClosed {
		m.mu.Unlock()
		return fmt.Errorf("%w: a frame of kind %d for connection %d after its close", ErrProtocol, f.kind, f.id)
	}
	var after func() // what is done on the local end once m.mu is released
	switch f.kind {
	case kindConnData:
		if c.peerEOF || c.queued+len(f.data) > connWindow {
			m.mu.Unlock()
			return fmt.Errorf("%w: connection %d's data past its end or window", ErrProtocol, f.id)
		}
		c.queued += len(f.data) // counted even when dropped: no credit comes back for it
		if !c.aborted && !c.sentClose {
			c.queue = append(c.queue, append([]byte(nil), f.data...))
		}
	case kindConnCredit:
		n := int(binary.BigEndian.Uint32(f.data))
		if n == 0 || c.credit+n > connWindow {
			m.mu.Unlock()
			return fmt.Errorf("%w: connection %d's credit of %d past its window", ErrProtocol, f.id, n)
		}
		c.credit += n
	case kindConnEOF:
		if c.peerEOF {
			m.mu.Unlock()
			return fmt.Errorf("%w: connection %d ended twice", ErrProtocol, f.id)
		}
		c.peerEOF = true
	case kindConnClose:
		c.peerClosed = true
		switch {
		case c.sentClose:
			m.forget(c)
		case !c.peerEOF: // a reset
			after = c.abort
		case !c.aborted: // its end came: what is queued is still written out
			after = func() { _ = c.local.CloseRead() }
		}
	default:
		m.mu.Unlock()
		return fmt.Errorf("%w: frame of kind %d", ErrProtocol, f.kind)
	}
	c.cond.Broadcast()
	m.mu.Unlock()
	if after != nil {
		after()
	}
	return nil
}

// end tears down every connection: the stream is over.
func (m *conns) end() {
	m.mu.Lock()
	m.ended = true
	all := make([]*relayConn, 0, len(m.live))
	for _, c := range m.live {
		all = append(all, c)
	}
	m.mu.Unlock()
	for _, c := range all {
		c.abort()
	}
}
