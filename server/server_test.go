package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/server/config"
)

// TestServeInProcess runs Serve on a unix socket: it answers, refuses an oversized
// header, and stops when its context ends, removing the socket.
func TestServeInProcess(t *testing.T) {
	sock := filepath.Join(sockDir(t), "c.sock")
	cfg, err := config.Parse("t.yaml", []byte("version: 1\nlisten: {unix: {path: "+sock+"}}\ntenants: [{name: a, root: /srv/a, quotas: {disk: host}}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()

	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	get := func(header string) (int, error) {
		req, _ := http.NewRequest("GET", "http://cordon/v1/health", nil)
		if header != "" {
			req.Header.Set("X-Big", header)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, err := get("")
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving after 10s: %d %v", code, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code, err := get(strings.Repeat("x", 64<<10)); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 64 KiB header: got %d %v; want 431", code, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after its context ended: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return 15s after its context ended")
	}
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after stop: %v; want removed", err)
	}
}
