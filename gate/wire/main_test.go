package wire

import (
	"bytes"
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// serveOnce answers one sandbox request on a real unix socket with reply lines.
func serveOnce(t *testing.T, replies ...SandboxReply) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "gate.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		wc := NewConn(c)
		var req Request
		if wc.Read(&req) != nil || req.Op != OpRequest || req.Gate != "push" {
			_ = wc.Write(SandboxReply{Error: "bad request"})
			return
		}
		for _, r := range replies {
			_ = wc.Write(r)
		}
	}()
	return sock
}

func TestGateMain(t *testing.T) {
	pending := SandboxReply{Pending: &Pending{ID: "3fa2c1d0", Gate: "push"}}
	tests := []struct {
		name             string
		sock             string
		args             []string
		code             int
		stdout, inStderr string
	}{
		{"approved", serveOnce(t, pending, SandboxReply{Outcome: &Outcome{Approved: true, By: "alice", Output: "pushed\n"}}), []string{"push"}, 0, "pushed\n", "request 3fa2c1d0 filed; waiting for a person to run `cordon gate approve 3fa2c1d0`"},
		{"failed", serveOnce(t, pending, SandboxReply{Outcome: &Outcome{Approved: true, By: "alice", ExitCode: 7, Output: "rejected\n"}}), []string{"push"}, 7, "rejected\n", "exited with status 7"},
		{"denied", serveOnce(t, pending, SandboxReply{Outcome: &Outcome{By: "bob", Why: "not today"}}), []string{"push"}, ExitDenied, "", "denied by bob: not today"},
		{"error", serveOnce(t, SandboxReply{Error: "unknown gate"}), []string{"push"}, ExitDenied, "", "unknown gate"},
		{"unreachable", filepath.Join(t.TempDir(), "none.sock"), []string{"push"}, ExitUnreachable, "", "no gates in this sandbox"},
		{"usage", "", nil, ExitUsage, "", "Usage: cordon gate NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := gateMain(context.Background(), tt.sock, tt.args, &out, &errb)
			if code != tt.code || out.String() != tt.stdout || !strings.Contains(errb.String(), tt.inStderr) {
				t.Errorf("gateMain = %d, stdout %q, stderr %q; want %d, %q, stderr containing %q", code, out.String(), errb.String(), tt.code, tt.stdout, tt.inStderr)
			}
		})
	}
}
