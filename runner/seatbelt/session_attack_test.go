package seatbelt

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/runner/sandbox"
)

// sessionFixture is a run root holding this session's run directory (r1, with its
// control and gate sockets, spill, secrets and gate link) and another run's (r2), and
// cordon's binary outside both.
type sessionFixture struct {
	fixture
	runs, own, other, init string
}

func newSessionFixture(t *testing.T) sessionFixture {
	t.Helper()
	f := newFixture(t)
	s := sessionFixture{fixture: f, runs: filepath.Join(f.root, "runs")}
	s.own, s.other = filepath.Join(s.runs, "r1"), filepath.Join(s.runs, "r2")
	s.init = filepath.Join(f.root, "cordon-bin", "cordon")
	for _, d := range []string{s.own + "/spill", s.own + "/secrets", s.own + "/bin", s.other + "/secrets", s.other + "/spill", s.runs + "/sessions", filepath.Dir(s.init)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(s.init, []byte("bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s sessionFixture) params() Params {
	p := Params{ProxyPort: testPort, RunDir: s.own, Secrets: filepath.Join(s.own, SecretsDirName)}
	sessionParams(&p, sandbox.Host{
		ControlSocket: filepath.Join(s.own, "control.sock"), GateSocket: filepath.Join(s.own, "gate.sock"),
		Init: s.init, SpillDir: filepath.Join(s.own, "spill"),
	})
	return p
}

// sessionAttacks: what a session's sandbox must not do (want false) and the little it
// needs (want true), whatever the contract grants.
func (s sessionFixture) sessionAttacks() []struct {
	name string
	q    query
	want bool
} {
	file := func(op, p string) query { return query{op: op, path: resolve(p)} }
	sock := func(p string) query { return query{op: "network-outbound", socket: resolve(p)} }
	own, other := s.own, s.other
	return []struct {
		name string
		q    query
		want bool
	}{
		{"connect the control socket", sock(own + "/control.sock"), true},
		{"connect the gate socket", sock(own + "/gate.sock"), true},
		{"exec cordon through bin/cordon", file("process-exec", s.init), true},
		{"read the spill", file("file-read-data", own+"/spill/1.out"), true},
		{"read its secrets", file("file-read-data", own+"/secrets/token"), true},
		{"list bin", file("file-read-data", own+"/bin"), true},
		{"unlink the control socket", file("file-write-unlink", own+"/control.sock"), false},
		{"replace the control socket", file("file-write-create", own+"/control.sock"), false},
		{"unlink the gate socket", file("file-write-unlink", own+"/gate.sock"), false},
		{"replace bin/cordon", file("file-write-create", own+"/bin/cordon"), false},
		{"unlink bin/cordon", file("file-write-unlink", own+"/bin/cordon"), false},
		{"add to bin", file("file-write-create", own+"/bin/git"), false},
		{"write the spill", file("file-write-data", own+"/spill/1.out"), false},
		{"write its secrets", file("file-write-create", own+"/secrets/x"), false},
		{"create in the run directory", file("file-write-create", own+"/x"), false},
		{"read the run directory", file("file-read-data", own+"/ledger"), false},
		{"write cordon's binary", file("file-write-data", s.init), false},
		{"exec from the spill", file("process-exec", own+"/spill/1.out"), false},
		{"exec from its secrets", file("process-exec", own+"/secrets/token"), false},
		{"exec another binary beside cordon's", file("process-exec", filepath.Dir(s.init)+"/other"), false},
		{"read another run's secrets", file("file-read-data", other+"/secrets/token"), false},
		{"read another run's spill", file("file-read-data", other+"/spill/1.out"), false},
		{"read the sessions directory", file("file-read-data", s.runs+"/sessions/s1.json"), false},
		{"connect a prefix of the control socket", sock(own + "/control.soc"), false},
		{"connect an extension of the control socket", sock(own + "/control.sock2"), false},
		{"connect below the control socket", sock(own + "/control.sock/x"), false},
		{"connect another run's control socket", sock(other + "/control.sock"), false},
		{"connect a session supervisor", sock(s.runs + "/sessions/s1.sock"), false},
		{"connect docker", sock("/var/run/docker.sock"), false},
		{"connect the ssh agent", sock("/private/tmp/com.apple.launchd.abc/Listeners"), false},
		{"connect a socket in the private /tmp", sock(own + "/tmp/x.sock"), false},
		{"bind the control socket", query{op: "network-bind", socket: resolve(own + "/control.sock")}, false},
	}
}

func (s sessionFixture) check(t *testing.T, pol *policy) {
	t.Helper()
	for _, a := range s.sessionAttacks() {
		d, err := pol.decide(a.q)
		if err != nil {
			t.Errorf("%s: %v", a.name, err)
			continue
		}
		if d.allow != a.want {
			t.Errorf("%s (%s %s%s): allowed=%v by the rule at line %d; want %v", a.name, a.q.op, a.q.path, a.q.socket, d.allow, d.line, a.want)
		}
	}
}

// TestSessionAttacks: with a session's and gates' parameters, under every example
// contract, the sandbox reaches its own two sockets, cordon's binary, its spill and its
// secrets, and nothing else of the run directory or the run root.
func TestSessionAttacks(t *testing.T) {
	for name, yaml := range examples(t) {
		t.Run(name, func(t *testing.T) {
			s := newSessionFixture(t)
			prof, err := Generate(s.plan(t, yaml), s.params())
			if err != nil {
				t.Fatal(err)
			}
			pol, err := compilePolicy(prof.SBPL)
			if err != nil {
				t.Fatalf("the profile does not parse: %v", err)
			}
			s.check(t, pol)
		})
	}
}

// TestSessionRunRootUnderAGrant: a contract whose grants contain the run root (here the
// fixture's root read-write, as a contract naming $TMPDIR or a home holding
// CORDON_RUN_ROOT would) still gives the sandbox nothing of its run directory beyond
// what the session needs (broke before: the grant let it replace the control and gate
// sockets and bin/cordon, and read and write the whole run directory). Other runs'
// directories stay in such a grant: the profile knows only its own run directory.
func TestSessionRunRootUnderAGrant(t *testing.T) {
	s := newSessionFixture(t)
	plan := s.plan(t, []byte("version: 1\nfilesystem:\n  writable: [\".\", \""+s.runs+"\"]\n  readable: [\"@system\"]\n"))
	prof, err := Generate(plan, s.params())
	if err != nil {
		t.Fatal(err)
	}
	pol, err := compilePolicy(prof.SBPL)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range s.sessionAttacks() {
		if within(resolve(a.q.path), resolve(s.own)) || a.q.socket != "" || a.want {
			d, err := pol.decide(a.q)
			if err != nil || d.allow != a.want {
				t.Errorf("%s (%s %s%s): allowed=%v by the rule at line %d (%v); want %v", a.name, a.q.op, a.q.path, a.q.socket, d.allow, d.line, err, a.want)
			}
		}
	}
}

// TestSessionSocketQuoting: socket paths with backslashes, parentheses, regex
// metacharacters and a double quote reach the profile exactly (a path-literal is no
// regex); one with a newline or a relative one is refused.
func TestSessionSocketQuoting(t *testing.T) {
	s := newSessionFixture(t)
	plan := s.plan(t, examples(t)["gates"])
	for _, name := range []string{`c\tl.sock`, `c.*l") (allow default`, `[a-z]+$.sock`, `c"q.sock`} {
		p := s.params()
		p.Control = filepath.Join(s.own, name)
		prof, err := Generate(plan, p)
		if err != nil {
			t.Errorf("%q: %v", name, err)
			continue
		}
		pol, err := compilePolicy(prof.SBPL)
		if err != nil {
			t.Errorf("%q: the profile does not parse: %v", name, err)
			continue
		}
		for _, c := range []struct {
			q    query
			want bool
		}{
			{query{op: "network-outbound", socket: resolve(p.Control)}, true},
			{query{op: "network-outbound", socket: resolve(s.own + "/ctl.sock")}, false},
			{query{op: "network-outbound", socket: "/var/run/docker.sock"}, false},
			{query{op: "file-write-create", path: "/private/etc/x"}, false},
		} {
			if d, err := pol.decide(c.q); err != nil || d.allow != c.want {
				t.Errorf("%q: %s %s%s: allowed=%v by line %d (%v); want %v", name, c.q.op, c.q.path, c.q.socket, d.allow, d.line, err, c.want)
			}
		}
	}
	for _, bad := range []string{s.own + "/c\ntl.sock", s.own + "/c\x00.sock", "ctl.sock"} {
		p := s.params()
		p.Control = bad
		if _, err := Generate(plan, p); !errors.Is(err, ErrInexpressible) {
			t.Errorf("control socket %q: err %v; want ErrInexpressible", bad, err)
		}
		p = s.params()
		p.Gate = bad
		if _, err := Generate(plan, p); !errors.Is(err, ErrInexpressible) {
			t.Errorf("gate socket %q: err %v; want ErrInexpressible", bad, err)
		}
	}
}
