package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/gate/wire"
)

// gateRun serves a gate Service on an admin socket under a temporary run root, as the
// runner does, plus a dead socket file that ls must skip.
func gateRun(t *testing.T) (root string, s *gate.Service) {
	t.Helper()
	root = t.TempDir()
	if err := os.MkdirAll(paths.Root(root).Gates(), 0o700); err != nil {
		t.Fatal(err)
	}
	g := contract.Gate{Name: "hello", Run: []string{"echo", "hi"}, Approve: contract.ApproveHuman, Why: "say hi", Timeout: contract.Duration(time.Minute)}
	s = gate.New(gate.Config{RunID: "20261129T201530Z-3fa9c1", Workspace: t.TempDir(), Gates: []contract.Gate{g}})
	ln, err := net.Listen("unix", paths.Root(root).GateSocket("20261129T201530Z-3fa9c1"))
	if err != nil {
		t.Fatal(err)
	}
	dead, err := net.Listen("unix", paths.Root(root).GateSocket("20261129T000000Z-000000"))
	if err != nil {
		t.Fatal(err)
	}
	dead.(*net.UnixListener).SetUnlinkOnClose(false)
	dead.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gate.ServeAdmin(ctx, ln, s) }()
	t.Cleanup(func() {
		s.Close()
		cancel()
		<-done
	})
	return root, s
}

func runGate(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := Run(context.Background(), IO{Stdout: &out, Stderr: &errb}, append([]string{"gate"}, args...))
	code := 0
	var st *errdefs.Status
	if errors.As(err, &st) {
		code = errdefs.ExitCode(err)
		errb.WriteString(errdefs.Message(err))
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestGateCLI(t *testing.T) {
	root, s := gateRun(t)
	if out, _, code := runGate(t, "ls", "--run-root", root); code != 0 || !strings.Contains(out, "no pending") {
		t.Errorf("ls with nothing pending = %d %q", code, out)
	}
	res := make(chan gate.Outcome, 2)
	for range 2 {
		go func() {
			out, _ := s.Request(context.Background(), "hello", "")
			res <- out
		}()
	}
	var ps []wire.Pending
	for deadline := time.Now().Add(10 * time.Second); len(ps) < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		ps = s.List()
	}
	if len(ps) != 2 {
		t.Fatalf("pending = %d; want 2", len(ps))
	}
	out, _, code := runGate(t, "ls", "--run-root", root, "--json")
	var js struct {
		Version int            `json:"gate_ls_version"`
		Pending []wire.Pending `json:"pending"`
	}
	if err := json.Unmarshal([]byte(out), &js); code != 0 || err != nil || js.Version != 1 || len(js.Pending) != 2 {
		t.Fatalf("ls --json = %d %q (%v)", code, out, err)
	}
	out, _, code = runGate(t, "show", "--run-root", root, ps[0].ID)
	if code != 0 || !strings.Contains(out, "say hi") || !strings.Contains(out, "echo hi") {
		t.Errorf("show = %d %q", code, out)
	}
	if _, _, code := runGate(t, "approve", "--run-root", root, ps[0].ID); code != 0 {
		t.Errorf("approve = %d", code)
	}
	if _, _, code := runGate(t, "deny", "--run-root", root, "--why", "once is enough", ps[1].ID); code != 0 {
		t.Errorf("deny = %d", code)
	}
	got := map[bool]gate.Outcome{}
	for range 2 {
		o := <-res
		got[o.Approved] = o
	}
	if o := got[true]; o.Output != "hi\n" || o.By == "" {
		t.Errorf("approved outcome = %+v", o)
	}
	if o := got[false]; o.Why != "once is enough" {
		t.Errorf("denied outcome = %+v", o)
	}
	for _, args := range [][]string{{"approve"}, {"show"}, {"deny"}, {"approve", "a", "b"}} {
		if _, _, code := runGate(t, append(args, "--run-root", root)...); code != 2 {
			t.Errorf("%v = %d; want 2", args, code)
		}
	}
	for _, verb := range []string{"approve", "deny", "show"} {
		if _, msg, code := runGate(t, verb, "--run-root", root, "deadbeef"); code != 1 || !strings.Contains(msg, "no pending request") {
			t.Errorf("%s of an unknown id = %d %q; want 1", verb, code, msg)
		}
	}
}
