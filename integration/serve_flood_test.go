package integration

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestServeFlood: clients that never authenticate cannot hold the TCP listener's
// connections. From eight loopback addresses, 130 connections each (past the per-peer
// share of 128 and, together, past the listener's 1024) send GET /v1/health and keep
// the connection open; a connection the server closes is dialed again and held after
// its TLS handshake, sending nothing. A request with a valid token must still be
// answered within a few seconds.
func TestServeFlood(t *testing.T) {
	s := startServe(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	var settled atomic.Int64
	gate := make(chan struct{}, 32)
	const peers, perPeer = 8, 130
	for p := 0; p < peers; p++ {
		local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+p))}
		for i := 0; i < perPeer; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				floodOne(ctx, s.addr, local, gate, &settled)
			}()
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	const want = peers * 128 // every share taken: the listener's 1024 connections
	for settled.Load() < want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := settled.Load(); n < want {
		t.Fatalf("the flood settled %d of %d clients in 60s", n, want)
	}

	c := s.client()
	c.Timeout = 4 * time.Second
	start := time.Now()
	req, _ := http.NewRequest("GET", "https://"+s.addr+"/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+s.tokens["acme"])
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("a valid token during the flood: %v after %s; want an answer", err, time.Since(start))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a valid token during the flood: %d; want 200", resp.StatusCode)
	}
	t.Logf("answered in %s", time.Since(start))
}

// floodOne is one hostile client, until ctx ends: it asks for /v1/health on a
// kept-alive connection and holds it; when the server closes it, it dials again and
// holds the new connection idle after the handshake, sending nothing; and so on,
// alternating. settled is counted once per client, when its first connection is
// answered (a handshake waits at most 10 s); dialing waits on gate, so the flood builds up without
// overflowing the listen backlog.
func floodOne(ctx context.Context, addr string, local *net.TCPAddr, gate chan struct{}, settled *atomic.Int64) {
	once := sync.OnceFunc(func() { settled.Add(1) })
	d := &net.Dialer{LocalAddr: local, Timeout: 10 * time.Second}
	for health := true; ctx.Err() == nil; health = !health {
		gate <- struct{}{}
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			<-gate
			time.Sleep(100 * time.Millisecond)
			continue
		}
		c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true})
		stop := context.AfterFunc(ctx, func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		err = c.HandshakeContext(ctx)
		if err == nil && health {
			err = askHealth(c)
		}
		<-gate
		if err == nil {
			once()
			c.SetDeadline(time.Time{})
			io.Copy(io.Discard, c) // hold it until the server closes it
		}
		stop()
		c.Close()
		time.Sleep(100 * time.Millisecond)
	}
}

func askHealth(c net.Conn) error {
	if _, err := fmt.Fprintf(c, "GET /v1/health HTTP/1.1\r\nHost: cordon\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}
