//go:build k8s

package k8s

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/gate/wire"
)

// gateRequest is a `cordon exec SID -- cordon gate NAME` running in the background.
type gateRequest struct {
	stdout, stderr bytes.Buffer
	done           chan int // its status
}

func askGate(ctx context.Context, t *testing.T, env []string, ws, sid, gate string) *gateRequest {
	t.Helper()
	cmd := exec.CommandContext(ctx, cordonBin(t), "exec", sid, "--", "cordon", "gate", gate)
	cmd.Dir, cmd.Env = ws, env
	r := &gateRequest{done: make(chan int, 1)}
	cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); r.done <- cmd.ProcessState.ExitCode() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-r.done; r.done <- 0 })
	return r
}

// pendingOn waits for the one request of session sid in `cordon gate ls --json` on
// this host, failing when req ends first.
func pendingOn(ctx context.Context, t *testing.T, env []string, ws, sid string, req *gateRequest) wire.Pending {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		code, stdout, stderr := cordonIn(ctx, t, env, ws, "gate", "ls", "--json")
		var ls struct {
			Pending []wire.Pending `json:"pending"`
		}
		if err := json.Unmarshal([]byte(stdout), &ls); code != 0 || err != nil {
			t.Fatalf("gate ls --json: status %d, %v\n%s%s", code, err, stdout, stderr)
		}
		for _, p := range ls.Pending {
			if p.Run == sid {
				return p
			}
		}
		select {
		case code := <-req.done:
			req.done <- code
			t.Fatalf("the requester ended (status %d) before its request showed:\n%s%s", code, req.stdout.String(), req.stderr.String())
		default:
		}
	}
	t.Fatal("the Pod's gate request never showed in cordon gate ls")
	return wire.Pending{}
}

func (r *gateRequest) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.done:
		r.done <- code
		return code
	case <-time.After(60 * time.Second):
		t.Fatal("the requester did not end after the decision")
		return 0
	}
}

// Approval gates on a Pod, through the real binaries: a command in the Pod asks with
// `cordon gate NAME` (on its PATH in the Pod), the request shows in `cordon gate ls`
// on this host, and `cordon gate approve` runs the operation here and gives the
// requester its output; `cordon gate deny` gives it the reason. Before, the command
// tries to remove, replace or add to the gate socket and its link, and to the
// directory on its PATH: each is refused, and the socket is the same one after (the
// requests that follow reach this host through it).
func TestPodGates(t *testing.T) {
	cs, _ := clientConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ns, node := namespaceWith(ctx, t, cs, restricted)
	image := podImage(t)
	ws := t.TempDir()
	data := fmt.Sprintf("version: 1\nimage: %s\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\"]\n"+
		"limits: {memory: 256MiB, pids: 128, cpu: 0.1}\n"+
		"gates:\n  - {name: hello, run: [\"echo\", \"hi from the host\"], why: say hi}\n", image)
	if err := os.WriteFile(filepath.Join(ws, "cordon.yaml"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	env := backendEnv(t, ns, node, image, "gates")
	code, stdout, stderr := cordonIn(ctx, t, env, ws, "session", "start", "--backend", "kubernetes", "--gates", "ask")
	if code != 0 {
		t.Fatalf("cordon session start with gates on the kubernetes backend: status %d\n%s%s", code, stdout, stderr)
	}
	sid := strings.TrimSpace(stdout)
	t.Cleanup(func() { cordonIn(context.Background(), t, env, ws, "session", "stop", sid) })

	inPod := func(script string) (int, string, string) {
		return cordonIn(ctx, t, env, ws, "exec", sid, "--", "sh", "-c", script)
	}
	const stat = "stat -L -c '%i %F' /run/cordon/gate.sock"
	code, before, stderr := inPod(stat + "; command -v cordon")
	if code != 0 || !strings.Contains(before, "socket") || !strings.Contains(before, "/run/cordon/bin/cordon") {
		t.Fatalf("the gate socket and cordon on PATH in the Pod: status %d\n%s%s", code, before, stderr)
	}
	for _, attack := range []string{
		"rm -f /run/cordon/gate.sock",
		"rm -f /run/cordon/gate/gate.sock",
		"mv /run/cordon/gate/gate.sock /run/cordon/gate/moved",
		"ln -sf /tmp/fake.sock /run/cordon/gate.sock",
		"ln -sf /tmp/fake.sock /run/cordon/gate/gate.sock",
		"touch /run/cordon/gate/planted",
		"mkfifo /run/cordon/gate/planted",
		"ln -sf /bin/sh /run/cordon/bin/cordon",
		"touch /run/cordon/bin/planted",
	} {
		if code, stdout, stderr := inPod(attack); code == 0 {
			t.Errorf("%q in the Pod succeeded: %s%s", attack, stdout, stderr)
		}
	}
	if code, after, stderr := inPod(stat + "; ls -A /run/cordon/gate /run/cordon/bin"); code != 0 || !strings.HasPrefix(after, before[:strings.IndexByte(before, '\n')]) ||
		strings.Contains(after, "planted") || strings.Contains(after, "moved") {
		t.Fatalf("the gate socket changed: before %q, after status %d %q %s", before, code, after, stderr)
	}

	req := askGate(ctx, t, env, ws, sid, "hello")
	p := pendingOn(ctx, t, env, ws, sid, req)
	if p.Gate != "hello" {
		t.Errorf("pending request %+v; want gate hello", p)
	}
	if code, stdout, stderr := cordonIn(ctx, t, env, ws, "gate", "approve", p.ID); code != 0 {
		t.Fatalf("gate approve: status %d\n%s%s", code, stdout, stderr)
	}
	if code := req.wait(t); code != 0 || !strings.Contains(req.stdout.String(), "hi from the host") {
		t.Errorf("the approved requester in the Pod: status %d\n%s%s; want 0 and the operation's output", code, req.stdout.String(), req.stderr.String())
	}

	req = askGate(ctx, t, env, ws, sid, "hello")
	p = pendingOn(ctx, t, env, ws, sid, req)
	if code, stdout, stderr := cordonIn(ctx, t, env, ws, "gate", "deny", p.ID, "--why", "not on a Friday"); code != 0 {
		t.Fatalf("gate deny: status %d\n%s%s", code, stdout, stderr)
	}
	if code := req.wait(t); code != 1 || !strings.Contains(req.stderr.String(), "not on a Friday") {
		t.Errorf("the denied requester in the Pod: status %d\n%s%s; want 1 and the reason", code, req.stdout.String(), req.stderr.String())
	}

	code, stdout, stderr = cordonIn(ctx, t, env, ws, "session", "stop", sid)
	if code != 0 {
		t.Fatalf("session stop: status %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = cordonIn(ctx, t, env, ws, "audit", "show", sid)
	for _, typ := range []string{"gate request hello", "gate APPROVE hello", "gate exec hello", "gate DENY hello"} {
		if !strings.Contains(stdout, typ) {
			t.Errorf("the session's log has no %s (status %d):\n%s%s", typ, code, stdout, stderr)
		}
	}
}
