package seatbelt

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/secret"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// TestRefusals: every promise macOS cannot keep is refused with its reason, all at once;
// a plain run on a loopback proxy is not.
func TestRefusals(t *testing.T) {
	ok := sandbox.Host{EgressAddr: "127.0.0.1:4000"}
	if err := refusals(&contract.Plan{}, ok); err != nil {
		t.Fatalf("a plain plan: %v", err)
	}
	// The defaults are not refused (Exec names them in a warning); asked-for limits are.
	defaults := contract.Plan{Limits: contract.LimitsPlan{Memory: 1 << 30, Pids: 10, Defaulted: []string{"memory", "pids"}}}
	if err := refusals(&defaults, ok); err != nil {
		t.Fatalf("a plan with only the default limits: %v", err)
	}
	for _, c := range []struct {
		name string
		plan contract.Plan
		host sandbox.Host
		want string
	}{
		{"memory", contract.Plan{Limits: contract.LimitsPlan{Memory: 1 << 30}}, ok, "limits.memory cannot be enforced"},
		{"pids", contract.Plan{Limits: contract.LimitsPlan{Pids: 100}}, ok, "RLIMIT_NPROC counts every process of the user"},
		{"cpu", contract.Plan{Limits: contract.LimitsPlan{CPU: 1}}, ok, "limits.cpu cannot be enforced"},
		{"session without init", contract.Plan{}, sandbox.Host{EgressAddr: ok.EgressAddr, ControlSocket: "/x"}, "are cordon's binary"},
		{"gates without a socket", contract.Plan{Gates: []contract.Gate{{}}}, ok, "no gate socket"},
		{"stage", contract.Plan{}, sandbox.Host{EgressAddr: ok.EgressAddr, Stage: &sandbox.Stage{}}, "staged runs"},
		{"no loopback port", contract.Plan{}, sandbox.Host{}, "not on a loopback port"},
	} {
		err := refusals(&c.plan, c.host)
		if !errors.Is(err, errdefs.ErrUnsupported) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrUnsupported saying %q", c.name, err, c.want)
		}
	}
	session := sandbox.Host{EgressAddr: ok.EgressAddr, ControlSocket: "/x/control.sock", GateSocket: "/x/gate.sock", Init: "/bin/cordon"}
	if err := refusals(&contract.Plan{Gates: []contract.Gate{{}}}, session); err != nil {
		t.Errorf("a session with gates: %v", err)
	}
	both := contract.Plan{Limits: contract.LimitsPlan{Memory: 1, Pids: 1}}
	if err := refusals(&both, ok); !strings.Contains(err.Error(), "memory") || !strings.Contains(err.Error(), "pids") {
		t.Errorf("two refusals: %v; want both", err)
	}
}

// TestSandboxEnv: the private $HOME and /tmp and the credential files move to their
// stand-ins, in values and in PATH-like lists; other values stay; TMPDIR is the private
// /tmp.
func TestSandboxEnv(t *testing.T) {
	dirs := []PrivateDir{{For: "/Users/me", Host: "/run/R/home"}, {For: "/tmp", Host: "/run/R/tmp"}}
	got := sandboxEnv([]string{
		"HOME=/Users/me", "PATH=/Users/me/go/bin:/usr/bin:/Users/meme/bin", "TMPDIR=/var/folders/x",
		"SSL_CERT_FILE=/run/cordon/secrets/ca.pem", "LANG=C.UTF-8", "X=/tmpfoo",
	}, dirs, "/run/R/secrets")
	want := []string{
		"HOME=/run/R/home", "PATH=/run/R/home/go/bin:/usr/bin:/Users/meme/bin",
		"SSL_CERT_FILE=/run/R/secrets/ca.pem", "LANG=C.UTF-8", "X=/tmpfoo", "TMPDIR=/run/R/tmp",
	}
	if !slices.Equal(got, want) {
		t.Errorf("sandboxEnv:\n got %q\nwant %q", got, want)
	}
}

// TestWriteSecrets: the directory is 0700 and new, each file 0400 with its value; a
// name that is a path, or a directory that exists, is refused.
func TestWriteSecrets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), SecretsDirName)
	if err := writeSecrets(dir, []sandbox.SecretFile{{Name: "TOKEN", Value: secret.New("tok-value")}}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("directory: %v, %v", st.Mode(), err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "TOKEN"))
	fst, _ := os.Stat(filepath.Join(dir, "TOKEN"))
	if err != nil || string(b) != "tok-value" || fst.Mode().Perm() != 0o400 {
		t.Errorf("file: %q %v, %v", b, fst.Mode(), err)
	}
	if err := writeSecrets(dir, nil); err == nil {
		t.Error("an existing directory was accepted")
	}
	for _, name := range []string{"../x", "", "..", "a/b"} {
		d := filepath.Join(t.TempDir(), "s")
		if err := writeSecrets(d, []sandbox.SecretFile{{Name: name, Value: secret.New("v")}}); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
}

// TestSecretsReadOnly: the credential files' directory is readable by the sandbox and
// not writable, and without credentials it stays closed like the rest of the run
// directory.
func TestSecretsReadOnly(t *testing.T) {
	f := newFixture(t)
	plan := f.plan(t, examples(t)["default"])
	secrets := filepath.Join(f.run, SecretsDirName)
	for _, c := range []struct {
		secrets   string
		op        string
		wantAllow bool
	}{
		{secrets, "file-read-data", true},
		{secrets, "file-write-data", false},
		{secrets, "file-write-create", false},
		{"", "file-read-data", false},
	} {
		prof, err := Generate(plan, Params{ProxyPort: testPort, RunDir: f.run, Secrets: c.secrets})
		if err != nil {
			t.Fatal(err)
		}
		pol, err := compilePolicy(prof.SBPL)
		if err != nil {
			t.Fatal(err)
		}
		d, err := pol.decide(query{op: c.op, path: resolve(secrets + "/TOKEN")})
		if err != nil || d.allow != c.wantAllow {
			t.Errorf("secrets %q, %s: allowed=%v (line %d), %v; want %v", c.secrets, c.op, d.allow, d.line, err, c.wantAllow)
		}
	}
}

// TestLinkGate: the directory standing in for GateBinDir gets a link named cordon to
// cordon's binary; without one nothing is made.
func TestLinkGate(t *testing.T) {
	bin := t.TempDir()
	if err := linkGate([]PrivateDir{{For: "/tmp", Host: t.TempDir()}}, sandbox.Host{Init: "/x/cordon"}); err != nil {
		t.Fatal(err)
	}
	if err := linkGate([]PrivateDir{{For: sandbox.GateBinDir, Host: bin}}, sandbox.Host{Init: "/x/cordon"}); err != nil {
		t.Fatal(err)
	}
	if to, err := os.Readlink(filepath.Join(bin, "cordon")); err != nil || to != "/x/cordon" {
		t.Errorf("link: %q, %v; want /x/cordon", to, err)
	}
}
