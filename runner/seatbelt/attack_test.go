package seatbelt

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
)

const testPort = 41234

// fixture is a workspace, a home with credentials and a run directory, all under one
// temporary root.
type fixture struct {
	root, ws, home, run string
	sys                 string // the host's system files as the plans see them (contract.Host.Root)
}

// systemRoot is the host layout every fixture's plans are compiled for (not the
// machine's own "/"): merged /usr with its top-level links, including /lib32, which a
// fresh Debian machine lacks, and the secrets "@system" hides.
var systemRoot = struct {
	dirs  []string
	links map[string]string
	files []string
}{
	dirs: []string{"usr/bin", "usr/lib", "usr/lib32", "usr/lib64", "usr/sbin", "etc/security", "etc/ssl/private", "run"},
	links: map[string]string{"bin": "usr/bin", "lib": "usr/lib", "lib32": "usr/lib32", "lib64": "usr/lib64",
		"sbin": "usr/sbin", "var/run": "../run"},
	files: []string{"etc/passwd", "etc/shadow", "etc/shadow-", "etc/gshadow", "etc/gshadow-", "etc/security/opasswd"},
}

// newSystemRoot builds systemRoot under dir.
func newSystemRoot(t testing.TB, dir string) {
	t.Helper()
	for _, d := range systemRoot.dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range systemRoot.links {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range systemRoot.files {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newFixture(t testing.TB) fixture {
	t.Helper()
	return newFixtureAt(t, t.TempDir())
}

// newFixtureAt is newFixture in the empty directory root.
func newFixtureAt(t testing.TB, root string) fixture {
	t.Helper()
	f := fixture{root: root, ws: filepath.Join(root, "ws"), home: filepath.Join(root, "home"), run: filepath.Join(root, "run"),
		sys: t.TempDir()}
	newSystemRoot(t, f.sys)
	for _, d := range []string{"ws/.git/hooks", "ws/.git/objects", "ws/src", "ws/build", "home/.ssh", "home/.aws", "run", "outside", "data"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{
		"ws/.git/config": "[core]\n", "ws/.git/HEAD": "ref: refs/heads/main\n", "ws/src/a.go": "package a\n",
		"home/.ssh/id_rsa": "KEY\n", "home/.aws/credentials": "[default]\n", "data/f": "data\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A link in the workspace to the credentials: the kernel checks where it leads.
	if err := os.Symlink(filepath.Join(root, "home/.ssh"), filepath.Join(f.ws, "keys")); err != nil {
		t.Fatal(err)
	}
	return f
}

// plan compiles contract text as the workspace's cordon.yaml.
func (f fixture) plan(t testing.TB, yaml []byte) *contract.Plan {
	t.Helper()
	file := filepath.Join(f.ws, "cordon.yaml")
	if err := os.WriteFile(file, yaml, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := contract.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	p, err := contract.Compile(c, contract.Host{Home: f.home, Cwd: f.ws, Root: f.sys})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f fixture) profile(t testing.TB, plan *contract.Plan) (*Profile, *policy) {
	t.Helper()
	prof, err := Generate(plan, Params{ProxyPort: testPort, RunDir: f.run, sys: &sysView{root: f.sys, own: []string{f.root}}})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := compilePolicy(prof.SBPL)
	if err != nil {
		t.Fatalf("the generated profile does not parse: %v\n%s", err, prof.SBPL)
	}
	return prof, pol
}

func examples(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("../../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example contracts: %v", err)
	}
	out := map[string][]byte{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(file), ".yaml")] = data
	}
	return out
}

// attack is one operation and whether the contract lets it through.
type attack struct {
	name string
	q    query
	// allowed names the example contracts under which it succeeds; the rest deny it.
	allowed []string
}

func (f fixture) attacks() []attack {
	ws, home := f.ws, f.home
	all := []string{"default", "gates", "go-build", "untrusted-script"}
	dotWritable := []string{"default", "gates", "go-build"}
	file := func(op, p string) query { return query{op: op, path: resolve(p)} }
	net := func(addr string) query { return query{op: "network-outbound", remote: addr} }
	return []attack{
		{"write .git/hooks/x", file("file-write-create", ws+"/.git/hooks/x"), nil},
		{"write .GIT/hooks/x (case)", file("file-write-create", ws+"/.GIT/hooks/x"), nil},
		{"write .git/config", file("file-write-data", ws+"/.git/config"), nil},
		{"write .git/objects/x", file("file-write-create", ws+"/.git/objects/x"), []string{"gates"}},
		{"read .git/config", file("file-read-data", ws+"/.git/config"), dotWritable},
		{"write src/a.go", file("file-write-data", ws+"/src/a.go"), dotWritable},
		{"read src/a.go", file("file-read-data", ws+"/src/a.go"), all},
		{"write build/out", file("file-write-create", ws+"/build/out"), all},
		{"create .envrc", file("file-write-create", ws+"/.envrc"), nil},
		{"create .EnvRC (case)", file("file-write-create", ws+"/.EnvRC"), nil},
		{"edit the contract", file("file-write-data", ws+"/cordon.yaml"), nil},
		{"read ~/.ssh/id_rsa", file("file-read-data", home+"/.ssh/id_rsa"), nil},
		{"read ws/keys/id_rsa (link to ~/.ssh)", file("file-read-data", ws+"/keys/id_rsa"), nil},
		{"read ~/.aws/credentials", file("file-read-data", home+"/.aws/credentials"), nil},
		{"exec from ~/.ssh", file("process-exec", home+"/.ssh/id_rsa"), nil},
		{"write ~/.bashrc", file("file-write-create", home+"/.bashrc"), nil},
		{"write outside the workspace", file("file-write-create", f.root+"/outside/x"), nil},
		{"read outside the workspace", file("file-read-data", f.root+"/data/f"), nil},
		{"write /usr/bin/x", file("file-write-create", "/usr/bin/x"), nil},
		{"read /usr/lib/x", file("file-read-data", "/usr/lib/x"), all},
		{"write the private $HOME", file("file-write-create", f.run+"/home/.cache/x"), all},
		{"write the private /tmp", file("file-write-create", f.run+"/tmp/x"), all},
		{"read the run directory", file("file-read-data", f.run+"/secret"), nil},
		{"read the login keychain", file("file-read-data", home+"/Library/Keychains/login.keychain-db"), nil},
		{"connect 1.2.3.4:443", net("1.2.3.4:443"), nil},
		{"connect the proxy port", net("127.0.0.1:41234"), []string{"go-build"}},
		{"connect another loopback port", net("127.0.0.1:22"), nil},
		{"signal a process in the sandbox", query{op: "signal", sameSandbox: true}, all},
		{"signal a process outside", query{op: "signal"}, nil},
		{"bind a port", query{op: "network-bind", remote: "127.0.0.1:8080"}, nil},
	}
}

// TestAttacks runs every attack against the profile of every example contract.
func TestAttacks(t *testing.T) {
	for name, yaml := range examples(t) {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			plan := f.plan(t, yaml)
			_, pol := f.profile(t, plan)
			for _, a := range f.attacks() {
				want := false
				for _, n := range a.allowed {
					want = want || n == name
				}
				d, err := pol.decide(a.q)
				if err != nil {
					t.Errorf("%s: %v", a.name, err)
					continue
				}
				if d.allow != want {
					t.Errorf("%s (%s %s%s): allowed=%v by the rule at line %d; want %v", a.name, a.q.op, a.q.path, a.q.remote, d.allow, d.line, want)
				}
			}
		})
	}
}

// TestLinksResolved: a link in the workspace is what the kernel follows, so the profile
// names where it leads, for a grant through it and for the credentials behind one.
func TestLinksResolved(t *testing.T) {
	f := newFixture(t)
	link := filepath.Join(f.root, "data-link")
	if err := os.Symlink(filepath.Join(f.root, "data"), link); err != nil {
		t.Fatal(err)
	}
	plan := f.plan(t, []byte("version: 1\nfilesystem:\n  writable: [\".\"]\n  readable: [\"@system\", \""+link+"\"]\n"))
	prof, pol := f.profile(t, plan)
	target := resolve(filepath.Join(f.root, "data"))
	if !strings.Contains(prof.SBPL, "(subpath "+quote(target)+")") {
		t.Errorf("the profile does not name the link's target %s", target)
	}
	if strings.Contains(prof.SBPL, quote(resolve(f.root)+"/data-link")) {
		t.Errorf("the profile names the link itself, which the kernel never checks")
	}
	if d, _ := pol.decide(query{op: "file-read-data", path: target + "/f"}); !d.allow {
		t.Errorf("reading through the granted link is denied by line %d", d.line)
	}
	keys := resolve(filepath.Join(f.ws, "keys", "id_rsa"))
	if want := resolve(filepath.Join(f.home, ".ssh", "id_rsa")); keys != want {
		t.Fatalf("ws/keys/id_rsa resolves to %s; want %s", keys, want)
	}
	if d, _ := pol.decide(query{op: "file-read-data", path: keys}); d.allow {
		t.Errorf("reading the credentials through a workspace link is allowed by line %d", d.line)
	}
}

// TestQuoting: a path reaches the profile only quoted, and one SBPL cannot hold is refused.
func TestQuoting(t *testing.T) {
	plan := func(p string) *contract.Plan {
		return &contract.Plan{Mounts: []contract.Mount{{Path: p, Type: contract.Bind, Access: contract.ReadWrite}}}
	}
	odd := `/nonexistent/a\b") (allow default` // a backslash, a quote and a closing paren
	prof, err := Generate(plan(odd), Params{RunDir: "/nonexistent/run"})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := compilePolicy(prof.SBPL)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := pol.decide(query{op: "file-write-create", path: odd + "/x"}); !d.allow {
		t.Errorf("writing inside %q is denied; the quoted path did not survive", odd)
	}
	if d, _ := pol.decide(query{op: "file-write-create", path: "/etc/x"}); d.allow {
		t.Errorf("the path's text injected a rule: writing /etc/x is allowed by line %d", d.line)
	}
	for _, bad := range []string{"/x/new\nline", "/x/tab\there", "/x/\xff", "relative/x"} {
		_, err := Generate(plan(bad), Params{RunDir: "/nonexistent/run"})
		if !errors.Is(err, ErrInexpressible) {
			t.Errorf("%q: err %v; want ErrInexpressible", bad, err)
		}
	}
	masked := &contract.Plan{Mounts: []contract.Mount{{Path: `/x/q"uote`, Type: contract.Mask}}}
	if _, err := Generate(masked, Params{RunDir: "/r"}); !errors.Is(err, ErrInexpressible) {
		t.Errorf("a denial of a path with a double quote: err %v; want ErrInexpressible (its regex cannot hold one)", err)
	}
	egress := &contract.Plan{Egress: []contract.EgressRule{{}}}
	if _, err := Generate(egress, Params{RunDir: "/r"}); err == nil {
		t.Error("a plan with egress and no proxy port gave a profile")
	}
}

// TestWideningKeepsMandatoryOpen: a deliberate widening of a credential store is not
// undone by the mandatory denials that follow the contract's rules.
func TestWideningKeepsMandatoryOpen(t *testing.T) {
	f := newFixture(t)
	plan := f.plan(t, []byte(`version: 1
filesystem:
  writable: ["."]
  readable: ["@system"]
  widen:
    - path: ~/.aws
      access: read
      why: the test reads a profile
`))
	_, pol := f.profile(t, plan)
	if d, _ := pol.decide(query{op: "file-read-data", path: resolve(f.home + "/.aws/credentials")}); !d.allow {
		t.Errorf("the widened ~/.aws is denied by line %d", d.line)
	}
	if d, _ := pol.decide(query{op: "file-read-data", path: resolve(f.home + "/.ssh/id_rsa")}); d.allow {
		t.Errorf("~/.ssh is allowed by line %d", d.line)
	}
}

// TestRunDirInsideCordonState: a run directory under cordon's own state (a mandatory
// denial) still gets its private $HOME and /tmp, and the rest of that state stays denied:
// the stand-ins are the last rules.
func TestRunDirInsideCordonState(t *testing.T) {
	f := newFixture(t)
	plan := f.plan(t, examples(t)["default"])
	state := filepath.Join(f.home, ".local/state/cordon")
	prof, err := Generate(plan, Params{RunDir: filepath.Join(state, "runs", "r1")})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := compilePolicy(prof.SBPL)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    query
		want bool
	}{
		{query{op: "file-write-create", path: resolve(state + "/runs/r1/home/x")}, true},
		{query{op: "file-write-create", path: resolve(state + "/runs/r1/tmp/x")}, true},
		{query{op: "file-read-data", path: resolve(state + "/audit/log.jsonl")}, false},
		{query{op: "file-read-data", path: resolve(state + "/runs/r1/secrets")}, false},
	} {
		if d, err := pol.decide(c.q); err != nil || d.allow != c.want {
			t.Errorf("%s %s: allowed=%v by line %d (%v); want %v", c.q.op, c.q.path, d.allow, d.line, err, c.want)
		}
	}
}
