// Package bridge is the sandbox's end of egress: process 1 relays the TCP connections
// made to 127.0.0.1 inside the sandbox to the egress proxy's unix socket outside. It
// is its own package so that cordon-init, which runs it, links neither net/http nor
// crypto/tls: the proxy (package egress) does all the parsing and deciding.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// bridgeDialTimeout bounds connecting to the proxy's socket.
const bridgeDialTimeout = 10 * time.Second

// Run accepts TCP connections on ln (127.0.0.1 inside the sandbox) and relays each one,
// both ways, to a new connection to the unix socket at socketPath, where the proxy
// listens. When one side finishes sending, the other is half-closed, so request/response
// protocols that close their write side first keep working.
//
// The bridge makes no decisions: it runs inside the sandbox, in cordon's PID 1, and the
// workload could bypass anything it did. Every decision, limit and timeout is the proxy's,
// outside the sandbox; when the proxy closes a connection, the bridge's copy ends too.
//
// Run returns nil when ctx is done, after closing ln and every relayed connection and
// waiting for them, or the error that stopped Accept.
func Run(ctx context.Context, ln net.Listener, socketPath string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopLn := context.AfterFunc(ctx, func() { ln.Close() })
	defer stopLn()

	var conns sync.WaitGroup
	defer conns.Wait()
	defer cancel() // runs before conns.Wait: closes every relayed connection

	dialer := &net.Dialer{Timeout: bridgeDialTimeout}
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("bridge accepting: %w", err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		conns.Go(func() { bridgeConn(ctx, dialer, c, socketPath) })
	}
}

// bridgeConn relays one accepted connection to a new connection to socketPath.
func bridgeConn(ctx context.Context, dialer *net.Dialer, c net.Conn, socketPath string) {
	defer c.Close()
	up, err := dialer.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return // the client sees its connection close: the proxy is not there
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() {
		c.Close()
		up.Close()
	})
	defer stop()

	done := make(chan error, 1)
	go func() { done <- halfCopy(c, up) }()
	if err := halfCopy(up, c); err != nil {
		c.Close()
		up.Close()
	}
	if err := <-done; err != nil {
		c.Close()
		up.Close()
	}
}

// halfCopy copies src to dst until src's end, then half-closes dst. io.Copy lets the
// kernel splice between TCP and unix sockets where it can.
func halfCopy(dst, src net.Conn) error {
	if _, err := io.Copy(dst, src); err != nil {
		return fmt.Errorf("bridge copy: %w", err)
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if err := cw.CloseWrite(); err != nil {
			return fmt.Errorf("bridge half-close: %w", err)
		}
		return nil
	}
	return dst.Close()
}
