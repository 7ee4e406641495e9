package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// startBridge runs Run on 127.0.0.1:0 to socketPath until the test ends.
func startBridge(t *testing.T, socketPath string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, ln, socketPath) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Bridge: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Bridge did not return after cancel")
		}
	})
	return ln.Addr().String()
}

// unixServer serves each connection on a unix socket with handle until the test ends.
func unixServer(t *testing.T, handle func(*net.UnixConn)) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c.(*net.UnixConn))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return path
}

func TestBridgeHalfCloseClientFirst(t *testing.T) {
	// The server reads to EOF (the client's half-close must arrive), then answers.
	sock := unixServer(t, func(c *net.UnixConn) {
		h := sha256.New()
		n, _ := io.Copy(h, c)
		fmt.Fprintf(c, "%d %s", n, hex.EncodeToString(h.Sum(nil)))
		c.CloseWrite()
	})
	addr := startBridge(t, sock)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	const size = 8 << 20
	go func() {
		io.CopyN(c, testutil.RandReader(5), size)
		c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(size) + " " + testutil.SumOf(size, 5); string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestBridgeHalfCloseServerFirst(t *testing.T) {
	// The server greets and half-closes; the client reads to EOF, then still talks.
	got := make(chan string, 1)
	sock := unixServer(t, func(c *net.UnixConn) {
		io.WriteString(c, "greeting")
		c.CloseWrite()
		b, _ := io.ReadAll(c)
		got <- string(b)
	})
	addr := startBridge(t, sock)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "greeting" {
		t.Fatalf("read %q, %v; want greeting", b, err)
	}
	io.WriteString(c, "after eof")
	c.(*net.TCPConn).CloseWrite()
	select {
	case s := <-got:
		if s != "after eof" {
			t.Errorf("server got %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server got nothing after the client's half-close")
	}
}

func TestBridgeNoSocket(t *testing.T) {
	addr := startBridge(t, filepath.Join(t.TempDir(), "missing.sock"))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("read %d, %v; want the connection closed", n, err)
	}
}

func TestBridgeCancelClosesConnections(t *testing.T) {
	sock := unixServer(t, func(c *net.UnixConn) { io.Copy(io.Discard, c) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, ln, sock) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "open")
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Bridge: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Bridge did not return after cancel with a connection open")
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Errorf("connection still open after cancel")
	}
}
