package ctlmux

import (
	"net"
	"net/netip"
	"sync"
)

// Listener is where [Host] delivers the connections the Pod's commands make to one of
// cordon's services: [NewListener]'s those to [ProxyAddr], [NewGateListener]'s those
// to [GateSocket]. Its Addr is that address. It is closed when Host returns;
// connections not yet accepted are then closed. It is safe for concurrent use.
type Listener struct {
	addr  net.Addr
	conns chan net.Conn // at most the port's bound: the open connections bound them

	mu     sync.Mutex // mu guards closed, and orders deliveries against Close.
	closed bool
	done   chan struct{}
}

// Listeners are the services' listeners [Host] delivers the Pod's connections on. A
// nil one is a service the spec has not: the Pod may open no connection to it.
type Listeners struct {
	Egress *Listener // from NewListener
	Gate   *Listener // from NewGateListener
}

// NewListener returns a Listener for [Host]'s egress connections.
func NewListener() *Listener {
	return newListener(net.TCPAddrFromAddrPort(netip.MustParseAddrPort(ProxyAddr)), MaxConns)
}

// NewGateListener returns a Listener for [Host]'s gate connections.
func NewGateListener() *Listener {
	return newListener(&net.UnixAddr{Name: GateSocket, Net: "unix"}, MaxGateConns)
}

func newListener(addr net.Addr, n int) *Listener {
	return &Listener{addr: addr, conns: make(chan net.Conn, n), done: make(chan struct{})}
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

// Addr is where the connections were made in the Pod: [ProxyAddr] or [GateSocket].
func (l *Listener) Addr() net.Addr { return l.addr }

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
	default: // cannot happen: the open connections are at most the port's bound
		return false
	}
}
