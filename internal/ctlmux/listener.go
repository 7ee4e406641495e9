package ctlmux

import (
	"net"
	"net/netip"
	"sync"
)

// Listener is where [Host] delivers the Pod's egress connections: each is a
// connection a command made to [ProxyAddr] in the Pod. Its Addr is that address. It
// is closed when Host returns; connections not yet accepted are then closed. It is
// safe for concurrent use.
type Listener struct {
	conns chan net.Conn // at most MaxConns: the open connections bound them

	mu     sync.Mutex // mu guards closed, and orders deliveries against Close.
	closed bool
	done   chan struct{}
}

// NewListener returns a Listener for [Host].
func NewListener() *Listener {
	return &Listener{conns: make(chan net.Conn, MaxConns), done: make(chan struct{})}
}

// Accept waits for the next connection, until the listener is closed.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener and every connection not yet accepted.
func (l *Listener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	for {
		select {
		case c := <-l.conns:
			c.Close()
		default:
			return nil
		}
	}
}

// Addr is [ProxyAddr], where the connections were made.
func (l *Listener) Addr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(ProxyAddr))
}

// deliver queues c for Accept; false when the listener is closed.
func (l *Listener) deliver(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	select {
	case l.conns <- c:
		return true
	default: // cannot happen: the open connections are at most MaxConns
		return false
	}
}
