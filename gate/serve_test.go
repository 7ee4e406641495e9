package gate

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/gate/wire"
)

// sockets serves s on a sandbox and an admin socket in a temporary directory until the
// test ends.
func sockets(t *testing.T, s *Service) (sandbox, admin string) {
	t.Helper()
	dir := t.TempDir()
	sandbox, admin = filepath.Join(dir, "gate.sock"), filepath.Join(dir, "admin.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	for _, p := range []struct {
		path  string
		serve func(net.Listener) error
	}{
		{sandbox, func(ln net.Listener) error {
			return ServeSandbox(ctx, ln, s, func(net.Conn) (string, error) { return "3", nil })
		}},
		{admin, func(ln net.Listener) error { return ServeAdmin(ctx, ln, s) }},
	} {
		ln, err := net.Listen("unix", p.path)
		if err != nil {
			t.Fatal(err)
		}
		go func() { done <- p.serve(ln) }()
	}
	t.Cleanup(func() {
		s.Close()
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	})
	return sandbox, admin
}

func waitListed(t *testing.T, admin string) wire.Pending {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ps, err := wire.List(context.Background(), admin)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) > 0 {
			return ps[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("nothing pending on the admin socket")
	return wire.Pending{}
}

func echoGate() contract.Gate {
	return contract.Gate{Name: "hello", Run: []string{"sh", "-c", "echo hello {{.Run}}; exit 3"}, Approve: contract.ApproveHuman, Why: "t", Timeout: contract.Duration(time.Minute)}
}

func TestWireApproveRoundTrip(t *testing.T) {
	s := New(Config{RunID: testRun, Workspace: t.TempDir(), Gates: []contract.Gate{echoGate()}})
	sandbox, admin := sockets(t, s)
	type res struct {
		out wire.Outcome
		err error
	}
	ch := make(chan res, 1)
	var progress bytes.Buffer
	go func() {
		out, err := wire.Ask(context.Background(), sandbox, "hello", &progress)
		ch <- res{out, err}
	}()
	p := waitListed(t, admin)
	if p.Gate != "hello" || p.Cmd != "3" || p.Run != testRun || !strings.Contains(p.Preview, "echo hello") {
		t.Errorf("listed = %+v", p)
	}
	if err := wire.Approve(context.Background(), admin, "nope0000", "alice"); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("Approve of an unknown id = %v; want ErrNotFound", err)
	}
	if err := wire.Approve(context.Background(), admin, p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil || !r.out.Approved || r.out.ExitCode != 3 || r.out.Output != "hello "+testRun+"\n" || r.out.By != "alice" {
		t.Fatalf("Ask = %+v, %v", r.out, r.err)
	}
	if want := "request " + p.ID + " filed; waiting for a person to run `cordon gate approve " + p.ID + "`"; !strings.Contains(progress.String(), want) {
		t.Errorf("progress = %q; want %q", progress.String(), want)
	}
}

func TestWireDeny(t *testing.T) {
	s := New(Config{RunID: testRun, Workspace: t.TempDir(), Gates: []contract.Gate{echoGate()}})
	sandbox, admin := sockets(t, s)
	ch := make(chan wire.Outcome, 1)
	go func() {
		out, _ := wire.Ask(context.Background(), sandbox, "hello", nil)
		ch <- out
	}()
	p := waitListed(t, admin)
	if err := wire.Deny(context.Background(), admin, p.ID, "bob", "no"); err != nil {
		t.Fatal(err)
	}
	if out := <-ch; out.Approved || out.By != "bob" || out.Why != "no" {
		t.Errorf("outcome = %+v", out)
	}
	if err := wire.Deny(context.Background(), admin, p.ID, "bob", "again"); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("second Deny = %v; want ErrNotFound", err)
	}
}

func TestWireWithdrawOnClose(t *testing.T) {
	rec := &recorder{}
	s := New(Config{RunID: testRun, Workspace: t.TempDir(), Gates: []contract.Gate{echoGate()}, Events: rec})
	sandbox, admin := sockets(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := wire.Ask(ctx, sandbox, "hello", nil)
		errc <- err
	}()
	p := waitListed(t, admin)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Ask = %v; want context.Canceled", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(s.List()) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if ps, _ := wire.List(context.Background(), admin); len(ps) != 0 {
		t.Errorf("still pending after the client closed: %+v", ps)
	}
	if err := wire.Approve(context.Background(), admin, p.ID, "alice"); !errors.Is(err, wire.ErrNotFound) {
		t.Errorf("Approve after withdrawal = %v; want ErrNotFound", err)
	}
	if b := rec.bodies(t); !strings.Contains(b, "withdrawn") {
		t.Errorf("no withdrawal event: %s", b)
	}
}

func TestWireErrors(t *testing.T) {
	s := New(Config{RunID: testRun, Workspace: t.TempDir(), Gates: []contract.Gate{echoGate()}})
	sandbox, admin := sockets(t, s)
	if _, err := wire.Ask(context.Background(), sandbox, "nope", nil); err == nil || !strings.Contains(err.Error(), "unknown gate") {
		t.Errorf("Ask of an unknown gate = %v", err)
	}
	if _, err := wire.Ask(context.Background(), filepath.Join(t.TempDir(), "none.sock"), "hello", nil); !errors.Is(err, wire.ErrUnreachable) {
		t.Errorf("Ask without a socket = %v; want ErrUnreachable", err)
	}
	if ps, err := wire.List(context.Background(), admin); err != nil || len(ps) != 0 {
		t.Errorf("List = %v, %v; want empty", ps, err)
	}
	if fi, err := os.Stat(admin); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("admin socket: %v", err)
	}
}
