package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/session/wire"
)

// TestRunRootOutOfTheSandboxReach: gc trusts what a run root holds (owner records naming
// placeholders to remove and cgroups to kill), so a run refuses a run root its sandbox
// could write — inside the workspace, or relative (the workspace is where cordon runs) —
// before it starts anything, and nothing is left in it.
func TestRunRootOutOfTheSandboxReach(t *testing.T) {
	w := newWorld(t)
	inWS := filepath.Join(w.ws, ".c", "runs")
	if err := os.MkdirAll(inWS, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{inWS, ".c/runs"} {
		w.useRunRoot(root)
		r := w.cordon("", "run", "--", "sh", "-c", "echo ran > ran.txt")
		if r.code != 125 {
			t.Fatalf("run root %s: want 125, got %v", root, r)
		}
		want := "which the sandbox may write"
		if !filepath.IsAbs(root) {
			want = "not an absolute path"
		}
		assertContains(t, "stderr", r.stderr, want)
		assertAbsent(t, filepath.Join(w.ws, "ran.txt"))
		if entries, _ := os.ReadDir(inWS); len(entries) != 0 {
			t.Errorf("run root %s: the refused run left %d entries in it", root, len(entries))
		}
	}
}

// The two local users of the run-root attacks: uids no account uses, made up for the
// test (the kernel needs no passwd entry to run a process as a uid).
const (
	victimUID   = 64101
	attackerUID = 64102
	fakeSession = "20261205T000000Z-0a0a0a"
)

// sharedTmp is a directory that plays /tmp for the test: root's, sticky, writable by
// all. The victim's cordon finds its run root under it ($TMPDIR, no XDG_RUNTIME_DIR).
func sharedTmp(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "crtmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, fs.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	return d
}

// mkdirAs makes directory p with mode, owned by uid.
func mkdirAs(t *testing.T, p string, mode fs.FileMode, uid int) {
	t.Helper()
	if err := os.Mkdir(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// writeAs writes file p with mode, owned by uid.
func writeAs(t *testing.T, p, content string, mode fs.FileMode, uid int) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// victim is a local user without XDG_RUNTIME_DIR: a home and a workspace of its own
// under tmp, and cordon run as its uid.
type victim struct {
	t       *testing.T
	tmp, ws string
	env     []string
}

func newVictim(t *testing.T, tmp string) *victim {
	home, ws := filepath.Join(tmp, "home-victim"), filepath.Join(tmp, "ws-victim")
	mkdirAs(t, home, 0o700, victimUID)
	mkdirAs(t, ws, 0o755, victimUID)
	return &victim{t: t, tmp: tmp, ws: ws, env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp, "LANG=C.UTF-8",
		"CORDON_BACKEND=bwrap",
	}}
}

// runRoot is where the victim's cordon keeps its runs: $TMPDIR/cordon-UID/runs.
func (v *victim) runRootParent() string {
	return filepath.Join(v.tmp, "cordon-"+strconv.Itoa(victimUID))
}

// run runs bin (cordon or cordon-exec beside it) as the victim with stdin.
func (v *victim) run(bin, stdin string, args ...string) result {
	v.t.Helper()
	path := filepath.Join(filepath.Dir(testutil.Cordon(v.t)), bin) // built before the clock starts
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir, cmd.Env = v.ws, v.env
	cmd.Stdin = strings.NewReader(stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: victimUID, Gid: victimUID}}
	return runResult(v.t, cmd, bin)
}

// fakeSupervisor listens on sock as the attacker's uid (this test binary, copied where
// that uid can run it, as TestHelperFakeSupervisor): it records every byte a client
// sends into the file it returns and answers each request with a forged result.
func fakeSupervisor(t *testing.T, sock string) (captured string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "crattk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, attackerUID, attackerUID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(dir, "attacker")
	if err := os.WriteFile(helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	captured = filepath.Join(dir, "captured")
	bound := filepath.Join(dir, "s.sock")
	cmd := exec.Command(helper, "-test.run=^TestHelperFakeSupervisor$")
	cmd.Env = []string{"CORDON_FAKE_SUPERVISOR=" + bound, "CORDON_FAKE_CAPTURE=" + captured}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: attackerUID, Gid: attackerUID}}
	ready, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if _, err := ready.Read(make([]byte, 1)); err != nil {
		t.Fatalf("the attacker's supervisor did not start: %v", err)
	}
	// The listening socket keeps its uid wherever its name is moved.
	if err := os.Rename(bound, sock); err != nil {
		t.Fatal(err)
	}
	return captured
}

// TestHelperFakeSupervisor is the attacker's supervisor of fakeSupervisor.
func TestHelperFakeSupervisor(t *testing.T) {
	sock := os.Getenv("CORDON_FAKE_SUPERVISOR")
	if sock == "" {
		return // not a test: a helper process, run with its environment set
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.Exit(3)
	}
	_ = os.Chmod(sock, 0o777)
	out, err := os.OpenFile(os.Getenv("CORDON_FAKE_CAPTURE"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		os.Exit(3)
	}
	_, _ = os.NewFile(3, "ready").Write([]byte{1})
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(0)
		}
		go func() {
			defer c.Close()
			br := bufio.NewReader(c)
			line, _ := br.ReadBytes('\n')
			_, _ = out.Write(line)
			go func() { _, _ = io.Copy(out, br) }()
			enc := json.NewEncoder(c)
			_ = enc.Encode(wire.Frame{FD: 1, Data: []byte("forged-output\n")})
			time.Sleep(500 * time.Millisecond) // take the stdin that follows
			_ = enc.Encode(wire.Frame{Result: &wire.Result{V: 1, Session: fakeSession, ExitCode: 0}})
		}()
	}
}

// TestRedRunRootParentMadeByAnotherUser (bwrap): a user without XDG_RUNTIME_DIR keeps
// its run root under the shared, sticky temporary directory; another local user makes
// its parent first and plants a session record and a socket of its own in it. The
// victim's `cordon run` and `cordon session start` refuse the run root (125, the
// component and its owner named), and `cordon exec` / `cordon-exec` refuse the
// session: the attacker's supervisor receives nothing of the victim's stdin and its
// forged result is never printed.
func TestRedRunRootParentMadeByAnotherUser(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBwrap(t)
	tmp := sharedTmp(t)
	v := newVictim(t, tmp)
	parent := v.runRootParent()
	wantOwner := "owned by uid " + strconv.Itoa(attackerUID)
	// First only the parent, empty: the victim's cordon would make its run root in it
	// (its own, private) and the attacker swap it later.
	mkdirAs(t, parent, 0o777, attackerUID)
	r := v.run("cordon", "", "run", "--", "sh", "-c", "echo ran > ran.txt")
	if r.code != 125 {
		t.Fatalf("cordon run: want 125, got %v", r)
	}
	assertContains(t, "cordon run stderr", r.stderr, wantOwner)
	assertAbsent(t, filepath.Join(v.ws, "ran.txt"))
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Fatalf("the refused run made %d entries in the attacker's directory", len(entries))
	}

	// Then a run root and a session of the attacker's in it.
	mkdirAs(t, filepath.Join(parent, "runs"), 0o777, attackerUID)
	sessions := filepath.Join(parent, "runs", "sessions")
	mkdirAs(t, sessions, 0o777, attackerUID)
	captured := fakeSupervisor(t, filepath.Join(sessions, fakeSession+".sock"))
	rec, _ := json.Marshal(wire.Info{ID: fakeSession, Workspace: v.ws})
	writeAs(t, filepath.Join(sessions, fakeSession+".json"), string(rec), 0o666, attackerUID)

	r = v.run("cordon", "", "run", "--", "true")
	if r.code != 125 {
		t.Fatalf("cordon run: want 125, got %v", r)
	}
	assertContains(t, "cordon run stderr", r.stderr, wantOwner)

	r = v.run("cordon", "", "session", "start")
	if r.code != 125 {
		t.Fatalf("cordon session start: want 125, got %v", r)
	}
	assertContains(t, "session start stderr", r.stderr, wantOwner)

	r = v.run("cordon", "", "session", "ls")
	if r.code != 125 || strings.Contains(r.stdout, fakeSession) {
		t.Fatalf("cordon session ls: want 125 and no planted session, got %v", r)
	}
	assertContains(t, "session ls stderr", r.stderr, wantOwner)

	for _, bin := range []string{"cordon", "cordon-exec"} {
		args := []string{"exec", "-i", fakeSession, "--", "cat"}
		if bin == "cordon-exec" {
			args = args[1:]
		}
		r = v.run(bin, "victim-stdin-secret\n", args...)
		if r.code != 125 || strings.Contains(r.stdout, "forged") {
			t.Fatalf("%s exec into the planted session: want 125 and no forged output, got %v", bin, r)
		}
		assertContains(t, bin+" exec stderr", r.stderr, wantOwner)
	}
	if data, _ := os.ReadFile(captured); len(data) != 0 {
		t.Errorf("the attacker's socket received %q", data)
	}
	if entries, _ := os.ReadDir(filepath.Join(parent, "runs")); len(entries) != 1 {
		t.Errorf("the victim's cordon made %d entries in the attacker's directory", len(entries)-1)
	}
}

// TestRedSessionSocketOfAnotherUser (bwrap): the victim's run root is its own all the
// way up, and the session record is the victim's, but the socket under the session's
// name is answered by another uid (a socket moved in, or a stale name reused). Both
// exec clients refuse it by SO_PEERCRED (125, the uid named) and send it nothing.
func TestRedSessionSocketOfAnotherUser(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBwrap(t)
	tmp := sharedTmp(t)
	v := newVictim(t, tmp)
	parent := v.runRootParent()
	mkdirAs(t, parent, 0o700, victimUID)
	mkdirAs(t, filepath.Join(parent, "runs"), 0o700, victimUID)
	sessions := filepath.Join(parent, "runs", "sessions")
	mkdirAs(t, sessions, 0o700, victimUID)
	captured := fakeSupervisor(t, filepath.Join(sessions, fakeSession+".sock"))
	rec, _ := json.Marshal(wire.Info{ID: fakeSession, Workspace: v.ws})
	writeAs(t, filepath.Join(sessions, fakeSession+".json"), string(rec), 0o600, victimUID)

	for _, bin := range []string{"cordon", "cordon-exec"} {
		args := []string{"exec", "-i", fakeSession, "--", "cat"}
		if bin == "cordon-exec" {
			args = args[1:]
		}
		r := v.run(bin, "victim-stdin-secret\n", args...)
		if r.code != 125 || strings.Contains(r.stdout, "forged") {
			t.Fatalf("%s exec: want 125 and no forged output, got %v", bin, r)
		}
		assertContains(t, bin+" exec stderr", r.stderr, "answered by uid "+strconv.Itoa(attackerUID))
	}
	if data, _ := os.ReadFile(captured); len(data) != 0 {
		t.Errorf("the attacker's socket received %q", data)
	}
}

// TestRedHostSocketOfAnotherUser: `cordon --host unix://PATH` sends its bearer token
// with every request, so a socket placed at PATH by another user (a directory it made
// first, a path a script names) must get nothing: the client checks the peer
// (SO_PEERCRED: root or the caller) before it sends a byte, as root and as a user.
func TestRedHostSocketOfAnotherUser(t *testing.T) {
	testutil.RequireRoot(t)
	tmp := sharedTmp(t)
	v := newVictim(t, tmp)
	dir := filepath.Join(tmp, "serve-by-attacker")
	mkdirAs(t, dir, 0o755, attackerUID)
	sock := filepath.Join(dir, "cordon.sock")
	captured := fakeSupervisor(t, sock)
	const token = "cordon-token-of-the-victim-0123456789"
	v.env = append(v.env, "CORDON_HOST=unix://"+sock, "CORDON_TOKEN="+token)
	r := v.run("cordon", "", "session", "ls")
	if r.code == 0 {
		t.Errorf("a user's client on another user's socket: %v; want it refused", r)
	}
	assertContains(t, "stderr", r.stderr, "answered by uid "+strconv.Itoa(attackerUID))
	cmd := exec.Command(testutil.Cordon(t), "--host", "unix://"+sock, "session", "ls")
	cmd.Env = append(os.Environ(), "CORDON_TOKEN="+token)
	if r := runResult(t, cmd, "cordon as root"); r.code == 0 || !strings.Contains(r.stderr, "answered by uid "+strconv.Itoa(attackerUID)) {
		t.Errorf("root's client on another user's socket: %v; want it refused", r)
	}
	if data, _ := os.ReadFile(captured); len(data) != 0 {
		t.Errorf("the attacker's socket received %q", data)
	}
}

// TestStatePathsNeverExposed: the credential ledger and the audit root follow one
// state rule ($XDG_STATE_HOME/cordon when absolute), and a contract that names either
// (or what is inside) as readable or writable is refused at check, for a user whose
// $XDG_STATE_HOME lies outside its home (where the ledger used to be exposable).
func TestStatePathsNeverExposed(t *testing.T) {
	testutil.RequireRoot(t)
	testutil.RequireBwrap(t)
	tmp := sharedTmp(t)
	v := newVictim(t, tmp)
	state := filepath.Join(tmp, "state-victim")
	for _, d := range []string{"", "cordon", "cordon/ledger", "cordon/ledger/grants", "cordon/runs"} {
		mkdirAs(t, filepath.Join(state, d), 0o700, victimUID)
	}
	v.env = append(v.env, "XDG_STATE_HOME="+state)
	for _, c := range []struct{ field, path string }{
		{"writable", filepath.Join(state, "cordon", "ledger")},
		{"readable", filepath.Join(state, "cordon", "ledger", "grants")},
		{"writable", filepath.Join(state, "cordon", "runs")},
		{"readable", filepath.Join(state, "cordon", "runs")},
	} {
		writeAs(t, filepath.Join(v.ws, "cordon.yaml"), "version: 1\nfilesystem:\n  "+c.field+": [\".\", \""+c.path+"\"]\n", 0o644, victimUID)
		r := v.run("cordon", "", "check")
		if r.code != 1 {
			t.Fatalf("%s %s: check want 1, got %v", c.field, c.path, r)
		}
		assertContains(t, c.field+" "+c.path, r.stdout+r.stderr, "cordon's own state")
	}
}
