package gate

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

const testRun = "20261129T201530Z-3fa9c1"

// recorder is an event.Sink that keeps events.
type recorder struct {
	mu sync.Mutex
	ev []event.Event
}

func (r *recorder) Emit(e event.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ev = append(r.ev, e)
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.ev {
		out = append(out, string(e.Type))
	}
	return out
}

func (r *recorder) bodies(t *testing.T) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	js, err := json.Marshal(r.ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// fixture is a workspace repository with one commit and a bare repository served over
// HTTP on loopback (testutil.GitServer, which records the passwords pushes carry), whose
// pre-receive hook records whether $GITHUB_PUSH reached the server's side.
type fixture struct {
	ws, bare, marks, url string
	head                 string
	srv                  *testutil.GitServer
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	_, err := exec.LookPath("git")
	testutil.Require(t, err == nil, "git (scripts/deps.sh installs it)")
	root := t.TempDir()
	srv := filepath.Join(root, "srv")
	f := fixture{ws: filepath.Join(root, "ws"), bare: filepath.Join(srv, "bare.git"), marks: filepath.Join(root, "marks")}
	for _, d := range []string{f.ws, f.marks, srv} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	runGit(t, root, "init", "-q", "--bare", f.bare)
	writeScript(t, filepath.Join(f.bare, "hooks", "pre-receive"),
		`if [ -n "$GITHUB_PUSH" ]; then echo present > `+f.marks+`/cred; else echo absent > `+f.marks+`/cred; fi`)
	f.srv = testutil.NewGitServer(t, srv)
	f.url = f.srv.URL + "/bare.git"
	runGit(t, f.ws, "init", "-q")
	if err := os.WriteFile(filepath.Join(f.ws, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runGit(t, f.ws, "add", "README")
	runGit(t, f.ws, "commit", "-q", "-m", "agent work")
	f.head = runGit(t, f.ws, "rev-parse", "HEAD")
	return f
}

// pushedWith reports whether the server saw exactly one push, authenticated with the
// minted value.
func (f fixture) pushedWith(t *testing.T, value string) {
	t.Helper()
	if got := f.srv.Passwords(); len(got) != 1 || got[0] != value {
		t.Errorf("the server saw pushes authenticated with %q; want one with the minted value", got)
	}
	if data, _ := os.ReadFile(filepath.Join(f.marks, "cred")); strings.TrimSpace(string(data)) != "absent" {
		t.Errorf("the credential reached a process on the repository's side: %q", data)
	}
}

func (f fixture) marker(name string) bool {
	_, err := os.Stat(filepath.Join(f.marks, name))
	return err == nil
}

func (f fixture) branch(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("git", "--git-dir", f.bare, "rev-parse", "--verify", "-q", "refs/heads/agent/"+testRun)
	out, _ := cmd.Output()
	return strings.TrimSpace(string(out))
}

func pushGate(f fixture, approve string) contract.Gate {
	return contract.Gate{
		Name: "push", Run: []string{"git", "push", f.url, "HEAD:refs/heads/agent/{{.Run}}"},
		Approve: approve, Why: "publishing is irreversible", Timeout: contract.Duration(time.Minute),
		Credential: &contract.Credential{Name: "GITHUB_PUSH", Provider: "local", Deliver: contract.DeliverGate},
	}
}

// minter counts mints and revocations.
type minter struct {
	minted, revoked atomic.Int32
}

func (m *minter) mint(_ context.Context, c contract.Credential) ([]string, func(context.Context) error, error) {
	m.minted.Add(1)
	return []string{c.Name + "=s3cr3t-value-xyz"}, func(context.Context) error {
		m.revoked.Add(1)
		return nil
	}, nil
}

func newService(f fixture, rec *recorder, m *minter, mode Mode, approve string) *Service {
	return New(Config{RunID: testRun, Workspace: f.ws, Gates: []contract.Gate{pushGate(f, approve)}, Mode: mode, Events: rec, Mint: m.mint})
}

// waitPending waits until s has a pending request and returns it.
func waitPending(t *testing.T, s *Service) Pending {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ps := s.List(); len(ps) > 0 {
			return ps[0]
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("no request became pending")
	return Pending{}
}

type result struct {
	out Outcome
	err error
}

func asyncRequest(ctx context.Context, s *Service) chan result {
	ch := make(chan result, 1)
	go func() {
		out, err := s.Request(ctx, "push", "7")
		ch <- result{out, err}
	}()
	return ch
}

func TestApprovePushes(t *testing.T) {
	f := newFixture(t)
	rec, m := &recorder{}, &minter{}
	s := newService(f, rec, m, Ask, contract.ApproveHuman)
	defer s.Close()
	if err := os.WriteFile(filepath.Join(f.ws, "notes.txt"), []byte("wip\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch := asyncRequest(context.Background(), s)
	p := waitPending(t, s)
	if len(p.ID) != 8 || p.Gate != "push" || p.Cmd != "7" || p.Argv[3] != "HEAD:refs/heads/agent/"+testRun {
		t.Errorf("pending = %+v", p)
	}
	for _, want := range []string{f.head + " (HEAD) -> refs/heads/agent/" + testRun, "push to:    " + f.url, "agent work", "GITHUB_PUSH", f.ws, "history of what is pushed",
		"commits the push would publish (1, every one", "1 file changed"} {
		if !strings.Contains(p.Preview, want) {
			t.Errorf("preview lacks %q:\n%s", want, p.Preview)
		}
	}
	if err := s.Approve(context.Background(), p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil || !r.out.Approved || r.out.ExitCode != 0 || r.out.By != "alice" {
		t.Fatalf("outcome = %+v, %v", r.out, r.err)
	}
	if got := f.branch(t); got != f.head {
		t.Errorf("agent branch = %q; want %q", got, f.head)
	}
	f.pushedWith(t, "s3cr3t-value-xyz")
	if m.minted.Load() != 1 || m.revoked.Load() != 1 {
		t.Errorf("minted %d, revoked %d; want 1, 1", m.minted.Load(), m.revoked.Load())
	}
	if got := strings.Join(rec.types(), ","); got != "gate.request,gate.approve,gate.exec" {
		t.Errorf("events = %s", got)
	}
	bodies := rec.bodies(t)
	if strings.Contains(bodies, "s3cr3t") {
		t.Errorf("events carry the credential's value: %s", bodies)
	}
	for _, want := range []string{`"by":"alice"`, `"credential":"GITHUB_PUSH"`, `"exit_code":0`, `"id":"` + p.ID + `"`,
		`"push":{"url":"` + f.url + `","refs":[{"src":"HEAD","oid":"` + f.head + `","dst":"refs/heads/agent/` + testRun + `"}],"commits":1}`} {
		if !strings.Contains(bodies, want) {
			t.Errorf("events lack %s: %s", want, bodies)
		}
	}
	if err := s.Approve(context.Background(), p.ID, "alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Approve = %v; want ErrNotFound", err)
	}
}

func TestDenyPushesNothing(t *testing.T) {
	f := newFixture(t)
	rec, m := &recorder{}, &minter{}
	s := newService(f, rec, m, Ask, contract.ApproveHuman)
	defer s.Close()
	ch := asyncRequest(context.Background(), s)
	p := waitPending(t, s)
	if err := s.Deny(p.ID, "bob", "not today"); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil || r.out.Approved || r.out.Why != "not today" || r.out.By != "bob" {
		t.Fatalf("outcome = %+v, %v", r.out, r.err)
	}
	if f.branch(t) != "" || m.minted.Load() != 0 {
		t.Error("a denied request pushed or minted")
	}
	if got := strings.Join(rec.types(), ","); got != "gate.request,gate.deny" {
		t.Errorf("events = %s", got)
	}
	if b := rec.bodies(t); !strings.Contains(b, `"reason":"not today"`) || !strings.Contains(b, `"by":"bob"`) {
		t.Errorf("deny event = %s", b)
	}
}

func TestRefusedAtOnce(t *testing.T) {
	tests := []struct {
		name    string
		mode    Mode
		approve string
		noMint  bool
		why     string
	}{
		{"approve deny", Ask, contract.ApproveDeny, false, "approve: deny"},
		{"deny mode", DenyAll, contract.ApproveHuman, false, "deny mode"},
		{"no minter", Ask, contract.ApproveHuman, true, "no provider can mint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			rec, m := &recorder{}, &minter{}
			s := newService(f, rec, m, tt.mode, tt.approve)
			if tt.noMint {
				s.cfg.Mint = nil
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			out, err := s.Request(ctx, "push", "")
			if err != nil || out.Approved || !strings.Contains(out.Why, tt.why) || out.By != "cordon" {
				t.Fatalf("outcome = %+v, %v; want refused with %q", out, err, tt.why)
			}
			if got := strings.Join(rec.types(), ","); got != "gate.request,gate.deny" {
				t.Errorf("events = %s", got)
			}
			if len(s.List()) != 0 || f.branch(t) != "" {
				t.Error("refused request left something behind")
			}
		})
	}
}

func TestWithdrawnWhenRequesterLeaves(t *testing.T) {
	f := newFixture(t)
	rec, m := &recorder{}, &minter{}
	s := newService(f, rec, m, Ask, contract.ApproveHuman)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ch := asyncRequest(ctx, s)
	p := waitPending(t, s)
	cancel()
	r := <-ch
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Request = %+v, %v; want context.Canceled", r.out, r.err)
	}
	if len(s.List()) != 0 {
		t.Error("withdrawn request still listed")
	}
	if err := s.Approve(context.Background(), p.ID, "alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Approve of a withdrawn request = %v; want ErrNotFound", err)
	}
	if b := rec.bodies(t); !strings.Contains(b, "gate.deny") || !strings.Contains(b, "withdrawn") {
		t.Errorf("events = %s", b)
	}
}

func TestCloseRefusesPending(t *testing.T) {
	f := newFixture(t)
	rec, m := &recorder{}, &minter{}
	s := newService(f, rec, m, Ask, contract.ApproveHuman)
	ch := asyncRequest(context.Background(), s)
	waitPending(t, s)
	s.Close()
	r := <-ch
	if r.err != nil || r.out.Approved || r.out.Why != "the run ended" {
		t.Fatalf("outcome = %+v, %v", r.out, r.err)
	}
	out, err := s.Request(context.Background(), "push", "")
	if err != nil || out.Approved || out.Why != "the run ended" {
		t.Errorf("Request after Close = %+v, %v", out, err)
	}
	s.Close() // idempotent
}

// TestPendingBounded: a sandbox filing request after request gets refusals past
// MaxPending, each logged, and the list stays bounded.
func TestPendingBounded(t *testing.T) {
	f := newFixture(t)
	rec, m := &recorder{}, &minter{}
	s := newService(f, rec, m, Ask, contract.ApproveHuman)
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range MaxPending {
		asyncRequest(ctx, s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(s.List()) < MaxPending && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	out, err := s.Request(ctx, "push", "")
	if err != nil || out.Approved || !strings.Contains(out.Why, "too many requests") {
		t.Fatalf("request past the bound = %+v, %v", out, err)
	}
	if n := len(s.List()); n != MaxPending {
		t.Errorf("%d pending, want %d", n, MaxPending)
	}
}

func TestUnknownGate(t *testing.T) {
	s := New(Config{RunID: testRun})
	if _, err := s.Request(context.Background(), "nope", ""); !errors.Is(err, ErrUnknownGate) {
		t.Errorf("err = %v; want ErrUnknownGate", err)
	}
}

// TestRepoConfigCannotRunCode: hooks, fsmonitor and credential helpers the agent put in
// the workspace's .git/config do not run, and the push still works.
func TestRepoConfigCannotRunCode(t *testing.T) {
	f := newFixture(t)
	hooks := filepath.Join(filepath.Dir(f.ws), "evil-hooks")
	for _, h := range []string{"pre-push", "reference-transaction", "post-index-change"} {
		writeScript(t, filepath.Join(hooks, h), "touch "+f.marks+"/hook-"+h)
		writeScript(t, filepath.Join(f.ws, ".git", "hooks", h), "touch "+f.marks+"/dothook-"+h)
	}
	fsmon := filepath.Join(filepath.Dir(f.ws), "fsmon")
	writeScript(t, fsmon, "touch "+f.marks+"/fsmonitor")
	helper := filepath.Join(filepath.Dir(f.ws), "helper")
	writeScript(t, helper, "touch "+f.marks+"/helper")
	runGit(t, f.ws, "config", "core.hooksPath", hooks)
	runGit(t, f.ws, "config", "core.fsmonitor", fsmon)
	runGit(t, f.ws, "config", "credential.helper", helper)
	runGit(t, f.ws, "config", "core.sshCommand", "touch "+f.marks+"/ssh")
	runGit(t, f.ws, "config", "log.showSignature", "true")

	rec, m := &recorder{}, &minter{}
	s := newService(f, rec, m, Ask, contract.ApproveHuman)
	defer s.Close()
	ch := asyncRequest(context.Background(), s)
	p := waitPending(t, s)
	if strings.Contains(p.Preview, "WARNING") {
		t.Errorf("preview warns about overridable settings:\n%s", p.Preview)
	}
	if err := s.Approve(context.Background(), p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.out.ExitCode != 0 {
		t.Fatalf("push failed: %+v", r.out)
	}
	if f.branch(t) != f.head {
		t.Error("push did not happen")
	}
	entries, _ := os.ReadDir(f.marks)
	for _, e := range entries {
		if e.Name() != "cred" {
			t.Errorf("agent-controlled code ran: marker %s", e.Name())
		}
	}
}

// TestPushIgnoresRepoConfig: a push runs from cordon's scratch repository, so the
// workspace's configuration cannot redirect it (insteadOf, a remote named like the URL)
// or run a command (receivepack): the push goes where the preview said.
func TestPushIgnoresRepoConfig(t *testing.T) {
	f := newFixture(t)
	evil := filepath.Join(t.TempDir(), "evil.git")
	runGit(t, f.ws, "init", "-q", "--bare", evil)
	writeScript(t, filepath.Join(evil, "hooks", "pre-receive"), "touch "+f.marks+"/evil-hook")
	runGit(t, f.ws, "config", "url."+evil+".insteadOf", f.url)
	runGit(t, f.ws, "config", "remote."+f.url+".url", evil)
	runGit(t, f.ws, "config", "remote.origin.receivepack", "touch "+f.marks+"/receivepack")
	runGit(t, f.ws, "config", "http.proxy", "http://127.0.0.1:9")
	rec, m := &recorder{}, &minter{}
	s := newService(f, rec, m, Ask, contract.ApproveHuman)
	defer s.Close()
	ch := asyncRequest(context.Background(), s)
	p := waitPending(t, s)
	assertHas(t, "preview", p.Preview, "push to:    "+f.url+" (named by the contract)")
	if err := s.Approve(context.Background(), p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.out.ExitCode != 0 || f.branch(t) != f.head {
		t.Fatalf("the push did not reach the URL shown: %+v", r.out)
	}
	f.pushedWith(t, "s3cr3t-value-xyz")
	for _, mark := range []string{"evil-hook", "receivepack"} {
		if f.marker(mark) {
			t.Errorf("the repository's configuration ran %s", mark)
		}
	}
}

func assertHas(t *testing.T, what, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("%s lacks %q:\n%s", what, want, got)
	}
}

func TestTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	g := contract.Gate{Name: "slow", Run: []string{"sh", "-c", "sleep 30 & sleep 30"}, Approve: contract.ApproveHuman, Why: "t", Timeout: contract.Duration(200 * time.Millisecond)}
	s := New(Config{RunID: testRun, Workspace: dir, Gates: []contract.Gate{g}})
	defer s.Close()
	ch := make(chan result, 1)
	go func() {
		out, err := s.Request(context.Background(), "slow", "")
		ch <- result{out, err}
	}()
	p := waitPending(t, s)
	start := time.Now()
	if err := s.Approve(context.Background(), p.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.out.ExitCode != exitTimeout || time.Since(start) > 10*time.Second {
		t.Errorf("outcome = %+v after %s", r.out, time.Since(start))
	}
}

func TestOutputBounded(t *testing.T) {
	b := &boundedBuffer{max: 10}
	b.Write([]byte("0123456789abcdef"))
	if s := b.String(); !strings.HasPrefix(s, "0123456789\n") || !strings.Contains(s, "10 of 16 bytes") {
		t.Errorf("bounded output = %q", s)
	}
}

func TestCredentialHelper(t *testing.T) {
	_, err := exec.LookPath("sh")
	testutil.Require(t, err == nil, "sh")
	c := &contract.Credential{Name: "TOK", Hosts: []string{"github.com", "*.example.com"}}
	h := strings.TrimPrefix(credentialHelper(c), "!")
	tests := []struct{ host, want string }{
		{"github.com", "username=x-access-token\npassword=v4lue\n"},
		{"api.example.com:8443", "username=x-access-token\npassword=v4lue\n"},
		{"evil.com", ""},
	}
	for _, tt := range tests {
		cmd := exec.Command("sh", "-c", h+` "$@"`, "helper", "get")
		cmd.Env = []string{"TOK=v4lue", "PATH=" + pathEnv}
		cmd.Stdin = strings.NewReader("protocol=https\nhost=" + tt.host + "\n\n")
		out, err := cmd.Output()
		if err != nil || string(out) != tt.want {
			t.Errorf("helper for %s = %q, %v; want %q", tt.host, out, err, tt.want)
		}
	}
}

func TestSanitize(t *testing.T) {
	if got := sanitize("a\x1b[31mb\tc\n\x9b"); got != "a\\x1b[31mb\tc\n\\x9b" {
		t.Errorf("sanitize = %q", got)
	}
	// A subject that reads "fix typo" and is "fix install.sh backdoor" reversed, or
	// hides words behind zero-width ones.
	if got := sanitize("fix \u202eodyt\u202c x\u200by\ufeff\u2066z\u2069"); got != `fix \u202eodyt\u202c x\u200by\ufeff\u2066z\u2069` {
		t.Errorf("sanitize = %q", got)
	}
}

// TestRequestsBounded (red team): a sandbox that asks as fast as it can, for a gate
// that is always refused, is logged for MaxRequests requests (a gate.request and a
// gate.deny each); every later one is refused at once without a line of its own, and
// Close logs how many were, in one gate.deny. Without the bound every request was two
// lines (some 3 MB a second from a session) and an id kept for the run.
func TestRequestsBounded(t *testing.T) {
	rec := &recorder{}
	s := New(Config{RunID: testRun, Workspace: t.TempDir(), Events: rec,
		Gates: []contract.Gate{{Name: "release", Run: []string{"true"}, Approve: contract.ApproveDeny}}})
	const extra = 250
	for i := range MaxRequests + extra {
		out, err := s.Request(context.Background(), "release", "")
		if err != nil || out.Approved || out.By != "cordon" {
			t.Fatalf("request %d: %+v, %v; want refused by cordon", i, out, err)
		}
		if i >= MaxRequests && !strings.Contains(out.Why, "too many gate requests") {
			t.Fatalf("request %d past the limit: %q", i, out.Why)
		}
	}
	if _, err := s.Request(context.Background(), "nonesuch", ""); !errors.Is(err, ErrUnknownGate) {
		t.Errorf("unknown gate past the limit: %v", err)
	}
	if n := len(rec.types()); n != 2*MaxRequests {
		t.Errorf("%d lines before Close; want %d", n, 2*MaxRequests)
	}
	s.Close()
	s.Close()
	types := rec.types()
	if len(types) != 2*MaxRequests+1 || types[len(types)-1] != "gate.deny" {
		t.Fatalf("%d lines after Close, last %q; want %d, the last a gate.deny", len(types), types[len(types)-1], 2*MaxRequests+1)
	}
	b := rec.ev[len(rec.ev)-1].Body.(event.GateDecisionBody)
	if b.ID != "" || !strings.HasPrefix(b.Reason, strconv.Itoa(extra)+" more gate requests refused") {
		t.Errorf("the count's line: %+v", b)
	}
	if len(s.used) != MaxRequests {
		t.Errorf("%d ids kept; want %d", len(s.used), MaxRequests)
	}
}

func TestModeFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want Mode
	}{
		{nil, Ask},
		{map[string]string{"CI": "true"}, DenyAll},
		{map[string]string{"CI": "true", "CORDON_GATES": "ask"}, Ask},
		{map[string]string{"CORDON_GATES": "deny"}, DenyAll},
		{map[string]string{"CORDON_GATES": "maybe"}, DenyAll},
	} {
		if got := ModeFromEnv(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("%v: %v; want %v", c.env, got, c.want)
		}
	}
}
