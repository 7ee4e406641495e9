package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/internal/testutil"
)

// gateWorld is a world whose workspace is a git repository with one commit, plus a
// bare repository outside it (invisible to the sandbox) whose pre-receive hook records,
// in marks (also outside), whether $GITHUB_PUSH reached it, and its value.
type gateWorld struct {
	*world
	bare, marks, head, url string
	srv                    *testutil.GitServer
}

const gatesContract = `version: 1
credentials:
  - {name: GITHUB_PUSH, provider: local, deliver: gate, ttl: 10m, scope: {scopes: ["repo:push"]}, why: push the agent's branch}
gates:
  - {name: push, run: ["git", "push", "BARE", "HEAD:refs/heads/agent/{{.Run}}"], credential: GITHUB_PUSH, why: publishing is irreversible}
  - {name: release, run: ["true"], approve: deny, why: people cut releases}
`

func newGateWorld(t *testing.T) *gateWorld {
	t.Helper()
	_, err := exec.LookPath("git")
	testutil.Require(t, err == nil, "git (scripts/deps.sh installs it)")
	root := t.TempDir()
	g := &gateWorld{world: newWorld(t), bare: filepath.Join(root, "srv", "bare.git"), marks: filepath.Join(root, "marks")}
	mustMkdir(t, g.marks)
	g.srv = testutil.NewGitServer(t, filepath.Dir(g.bare))
	g.url = g.srv.URL + "/bare.git"
	gitIn(t, root, "init", "-q", "--bare", g.bare)
	hook := filepath.Join(g.bare, "hooks", "pre-receive")
	mustWrite(t, hook, "#!/bin/sh\ncat >/dev/null\n"+
		`if [ -n "$GITHUB_PUSH" ]; then echo present; else echo absent; fi > `+g.marks+"/cred\n"+
		`printf %s "$GITHUB_PUSH" > `+g.marks+"/value\n")
	if err := os.Chmod(hook, 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(g.ws, "README"), "agent work\n")
	gitIn(t, g.ws, "init", "-q")
	gitIn(t, g.ws, "add", "README")
	gitIn(t, g.ws, "-c", "user.name=agent", "-c", "user.email=agent@example.com", "commit", "-q", "-m", "agent work")
	g.head = gitIn(t, g.ws, "rev-parse", "HEAD")
	g.contract(strings.Replace(gatesContract, "BARE", g.url, 1))
	return g
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// refs lists the bare repository's refs ("" when nothing was pushed).
func (g *gateWorld) refs() string {
	g.t.Helper()
	return gitIn(g.t, g.bare, "for-each-ref", "--format=%(refname) %(objectname)")
}

// bgCmd is a cordon invocation running in the background.
type bgCmd struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan error
}

func (w *world) background(args ...string) *bgCmd {
	w.t.Helper()
	b := &bgCmd{cmd: exec.Command(testutil.Cordon(w.t), args...), done: make(chan error, 1)}
	b.cmd.Dir, b.cmd.Env = w.ws, w.env
	b.cmd.Stdout, b.cmd.Stderr = &b.stdout, &b.stderr
	if err := b.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	w.t.Cleanup(func() { b.cmd.Process.Kill(); <-b.done })
	return b
}

// wait returns the background command's result; its buffers are safe to read after.
func (b *bgCmd) wait(t *testing.T) result {
	t.Helper()
	select {
	case err := <-b.done:
		b.done <- err // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatalf("cordon %v did not end; stderr so far unavailable", b.cmd.Args[1:])
	}
	return result{stdout: b.stdout.String(), stderr: b.stderr.String(), code: b.cmd.ProcessState.ExitCode()}
}

// pending lists the pending gate requests of run id.
func (w *world) pending(id string) []wire.Pending {
	w.t.Helper()
	r := w.cordon("", "gate", "ls", "--json")
	var ls struct {
		Version int            `json:"gate_ls_version"`
		Pending []wire.Pending `json:"pending"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &ls); r.code != 0 || err != nil || ls.Version != 1 {
		w.t.Fatalf("gate ls --json: %v: %v", err, r)
	}
	var out []wire.Pending
	for _, p := range ls.Pending {
		if p.Run == id {
			out = append(out, p)
		}
	}
	return out
}

// askPush starts `cordon exec ID -- cordon gate push` and waits for its request.
func (g *gateWorld) askPush(id string) (*bgCmd, wire.Pending) {
	g.t.Helper()
	b := g.background("exec", id, "--", "cordon", "gate", "push")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ps := g.pending(id); len(ps) == 1 {
			return b, ps[0]
		}
		select {
		case err := <-b.done:
			b.done <- err
			g.t.Fatalf("the requester ended before its request showed: %v\n%s", err, b.stderr.String())
		default:
		}
	}
	g.t.Fatal("the gate request never showed in cordon gate ls")
	return nil, wire.Pending{}
}

// gateTypes is the log's sequence of gate and credential events.
func gateTypes(recs []audit.Record) []string {
	var out []string
	for _, r := range recs {
		if t := string(r.Type); strings.HasPrefix(t, "gate.") || strings.HasPrefix(t, "cred.") {
			out = append(out, t)
		}
	}
	return out
}

func findEvent(t *testing.T, recs []audit.Record, typ string) string {
	t.Helper()
	for _, r := range recs {
		if string(r.Type) == typ {
			return string(r.Body)
		}
	}
	t.Fatalf("no %s in the log: %v", typ, gateTypes(recs))
	return ""
}

func TestGateApprovedPushesBranch(t *testing.T) {
	g := newGateWorld(t)
	id := g.startSession("--gates", "ask")
	b, p := g.askPush(id)
	want := []string{"git", "push", g.url, "HEAD:refs/heads/agent/" + id}
	if p.Gate != "push" || !slices.Equal(p.Argv, want) {
		t.Errorf("pending request: gate %q argv %q; want push %q", p.Gate, p.Argv, want)
	}
	assertContains(t, "preview", p.Preview, g.head+" (HEAD) -> refs/heads/agent/"+id)
	assertContains(t, "gate show", g.cordon("", "gate", "show", p.ID).stdout, g.head)
	if r := g.cordon("", "gate", "approve", p.ID); r.code != 0 {
		t.Fatalf("gate approve: %v", r)
	}
	r := b.wait(t)
	if r.code != 0 || !strings.Contains(r.stdout, "[new branch]") {
		t.Fatalf("cordon gate push: want exit 0 and git's output: %v", r)
	}
	if got := g.refs(); got != "refs/heads/agent/"+id+" "+g.head {
		t.Errorf("bare repository refs: got %q; want agent/%s at %s", got, id, g.head)
	}
	mark, _ := os.ReadFile(filepath.Join(g.marks, "cred"))
	pw := g.srv.Passwords()
	if len(pw) != 1 || !strings.HasPrefix(pw[0], "cordon_") || string(mark) != "absent\n" {
		t.Fatalf("the push must authenticate with GITHUB_PUSH and nothing on the repository's side see it: server saw %d pushes, hook saw %q", len(pw), mark)
	}
	tok := pw[0]
	value := []byte(tok)
	if r := g.cordon("", "exec", id, "--", "env"); r.code != 0 || strings.Contains(r.stdout, "GITHUB_PUSH") {
		t.Errorf("sandbox environment: %v", r)
	}
	// Pushing from inside fails, and the bare repository is not there to see: what
	// git says of it differs by image (a Pod's has no git-receive-pack), so the test
	// asks ls whether the path exists.
	if r = g.cordon("", "exec", id, "--", "git", "push", g.bare, "HEAD:refs/heads/x"); r.code == 0 {
		t.Errorf("a push from inside the sandbox succeeded: %v", r)
	}
	if r = g.cordon("", "exec", id, "--", "ls", g.bare); r.code == 0 {
		t.Errorf("the bare repository is seen from inside the sandbox: %v", r)
	}
	if r := g.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	if r := g.cordon("", "audit", "verify", id); r.code != 0 {
		t.Fatalf("audit verify: %v", r)
	}
	recs := sessionEvents(t, g.world, id)
	wantTypes := []string{"gate.request", "gate.approve", "cred.issue", "cred.revoke", "gate.exec"}
	if got := gateTypes(recs); !slices.Equal(got, wantTypes) {
		t.Errorf("gate events: got %v; want %v", got, wantTypes)
	}
	assertContains(t, "gate.exec", findEvent(t, recs, "gate.exec"), `"exit_code":0`)
	assertContains(t, "cred.issue", findEvent(t, recs, "cred.issue"), "GITHUB_PUSH")
	log, err := os.ReadFile(filepath.Join(g.auditRoot(), id, audit.EventsFile))
	if err != nil || bytes.Contains(log, value) {
		t.Errorf("the minted token is in the audit log (%v)", err)
	}
	if v := g.verifyToken(tok); v.code != 1 || !strings.Contains(v.stdout, "inactive") {
		t.Errorf("the gate's token outlived its push: %v", v)
	}
}

func TestGateDenied(t *testing.T) {
	g := newGateWorld(t)
	id := g.startSession("--gates", "ask")
	b, p := g.askPush(id)
	if r := g.cordon("", "gate", "deny", p.ID, "--why", "not today"); r.code != 0 {
		t.Fatalf("gate deny: %v", r)
	}
	r := b.wait(t)
	if r.code != 1 || !strings.Contains(r.stderr, "not today") {
		t.Errorf("denied request: want exit 1 and the reason: %v", r)
	}
	if refs := g.refs(); refs != "" {
		t.Errorf("pushed after a denial: %s", refs)
	}
	assertAbsent(t, filepath.Join(g.marks, "cred"))
	if r := g.cordon("", "gate", "approve", p.ID); r.code != 1 {
		t.Errorf("approve after deny: want 1 (no such pending request): %v", r)
	}
	if r := g.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	recs := sessionEvents(t, g.world, id)
	if got, want := gateTypes(recs), []string{"gate.request", "gate.deny"}; !slices.Equal(got, want) {
		t.Errorf("gate events: got %v; want %v", got, want)
	}
	body := findEvent(t, recs, "gate.deny")
	assertContains(t, "gate.deny", body, `"reason":"not today"`)
	assertContains(t, "gate.deny", body, `"id":"`+p.ID+`"`)
}

// TestGateRequestNamesItsCommand: the request is joined to the command whose process
// asked (by its cgroup), not to a command started later that is running at the time.
func TestGateRequestNamesItsCommand(t *testing.T) {
	g := newGateWorld(t)
	id := g.startSession("--gates", "ask")
	asker := g.background("exec", id, "--", "sh", "-c", "sleep 1; cordon gate push")
	time.Sleep(300 * time.Millisecond)
	later := g.background("exec", id, "--", "sleep", "30")
	var p wire.Pending
	for deadline := time.Now().Add(20 * time.Second); p.ID == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if ps := g.pending(id); len(ps) == 1 {
			p = ps[0]
		}
	}
	if p.ID == "" {
		t.Fatal("the gate request never showed")
	}
	if r := g.cordon("", "gate", "deny", p.ID); r.code != 0 {
		t.Fatalf("gate deny: %v", r)
	}
	asker.wait(t)
	later.cmd.Process.Kill()
	later.wait(t)
	if r := g.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	for _, rec := range sessionEvents(t, g.world, id) {
		if rec.Type == "cmd.start" && fmtInt(rec.Seq) == p.Cmd && !strings.Contains(string(rec.Body), "cordon gate push") {
			t.Errorf("the request names command %s, which is %s", p.Cmd, rec.Body)
		}
	}
	if p.Cmd == "" {
		t.Error("the request names no command")
	}
}

func TestGateRequesterKilledWhileWaiting(t *testing.T) {
	g := newGateWorld(t)
	id := g.startSession("--gates", "ask")
	b, p := g.askPush(id)
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.wait(t)
	deadline := time.Now().Add(5 * time.Second)
	for len(g.pending(id)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if ps := g.pending(id); len(ps) > 0 {
		t.Fatalf("the request of a killed requester is still pending after 5s: %+v", ps)
	}
	if r := g.cordon("", "gate", "approve", p.ID); r.code != 1 {
		t.Errorf("approving a withdrawn request: want 1: %v", r)
	}
	if refs := g.refs(); refs != "" {
		t.Errorf("pushed for a withdrawn request: %s", refs)
	}
	if r := g.cordon("", "exec", id, "--", "true"); r.code != 0 {
		t.Errorf("session unusable after its requester was killed: %v", r)
	}
	if r := g.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	recs := sessionEvents(t, g.world, id)
	if got, want := gateTypes(recs), []string{"gate.request", "gate.deny"}; !slices.Equal(got, want) {
		t.Errorf("gate events: got %v; want %v", got, want)
	}
	assertContains(t, "gate.deny", findEvent(t, recs, "gate.deny"), "withdrawn")
}

func TestGateDenyMode(t *testing.T) {
	g := newGateWorld(t)
	id := g.startSession("--gates", "deny")
	began := time.Now()
	r := g.cordon("", "exec", id, "--", "cordon", "gate", "push")
	if r.code != 1 || !strings.Contains(r.stderr, "--gates deny") {
		t.Errorf("gate under --gates deny: want exit 1 naming it: %v", r)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("a refusal under --gates deny took %s; it must not wait", took)
	}
	if ps := g.pending(id); len(ps) > 0 {
		t.Errorf("a request is pending under --gates deny: %+v", ps)
	}

	// One session per workspace: the deny-mode one ends first.
	if r := g.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	ask := g.startSession("--gates", "ask")
	r = g.cordon("", "exec", ask, "--", "cordon", "gate", "release")
	if r.code != 1 || !strings.Contains(r.stderr, "approve: deny") {
		t.Errorf("gate with approve: deny: want exit 1 naming it: %v", r)
	}
	r = g.cordon("", "exec", ask, "--", "cordon", "gate", "nope")
	if r.code != 1 || !strings.Contains(r.stderr, `unknown gate "nope"`) || !strings.Contains(r.stderr, "push, release") {
		t.Errorf("unknown gate: want exit 1 naming the contract's gates: %v", r)
	}
	if refs := g.refs(); refs != "" {
		t.Errorf("pushed while refused: %s", refs)
	}
	if r := g.cordon("", "session", "stop", ask); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}
	if got, want := gateTypes(sessionEvents(t, g.world, id)), []string{"gate.request", "gate.deny"}; !slices.Equal(got, want) {
		t.Errorf("--gates deny events: got %v; want %v", got, want)
	}
	recs := sessionEvents(t, g.world, ask)
	if got, want := gateTypes(recs), []string{"gate.request", "gate.deny"}; !slices.Equal(got, want) {
		t.Errorf("approve: deny events (the unknown gate logs nothing): got %v; want %v", got, want)
	}
	assertContains(t, "gate.deny", findEvent(t, recs, "gate.deny"), `"by":"cordon"`)
}
