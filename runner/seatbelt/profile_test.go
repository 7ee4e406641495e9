package seatbelt

import (
	"flag"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/gate/wire"
	"github.com/cordonhq/cordon/runner/sandbox"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// tokenize replaces the fixture's root with $ROOT (and its parent with $ROOT/..).
func (f fixture) tokenize(t testing.TB, s string) string {
	root := resolve(f.root)
	folded, err := foldRegex(root)
	if err != nil {
		t.Fatal(err)
	}
	fr := strings.TrimSuffix(strings.TrimPrefix(folded.arg, "^"), "(/|$)")
	s = strings.ReplaceAll(s, fr, "$ROOT")
	s = strings.ReplaceAll(s, root, "$ROOT")
	s = strings.ReplaceAll(s, f.root, "$ROOT") // as the contract's positions name it
	// The per-test directory above the root appears among the ancestors.
	return strings.ReplaceAll(s, `"`+filepath.Dir(root)+`"`, `"$ROOT/.."`)
}

// firstDiff shows the first line that differs.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n got: " + gl + "\nwant: " + wl
		}
	}
	return ""
}

// TestSessionRules: a session's profile ends with the two rules its process 1 needs,
// executing cordon's binary and connecting to the control socket, after every carve-out
// of the plan; a run's profile has neither.
func TestSessionRules(t *testing.T) {
	f := newFixture(t)
	plan := f.plan(t, []byte("version: 1\n"))
	run, err := Generate(plan, Params{ProxyPort: testPort, RunDir: f.run})
	if err != nil {
		t.Fatal(err)
	}
	init, sock := filepath.Join(f.root, "bin", "cordon"), filepath.Join(f.run, "control.sock")
	spill := filepath.Join(f.run, "spill")
	params := Params{ProxyPort: testPort, RunDir: f.run}
	sessionParams(&params, sandbox.Host{ControlSocket: sock, Init: init, SpillDir: spill})
	sess, err := Generate(plan, params)
	if err != nil {
		t.Fatal(err)
	}
	want := "(allow process-exec file-read* file-map-executable (literal " + quote(resolve(init)) + "))\n" +
		"(allow network-outbound (remote unix-socket (path-literal " + quote(resolve(sock)) + ")))\n" +
		"; The whole output of commands whose output was cut, at its host path.\n" +
		"(allow file-read* (subpath " + quote(resolve(spill)) + "))\n"
	if !strings.HasSuffix(sess.SBPL, want) || !strings.HasPrefix(sess.SBPL, run.SBPL) {
		t.Errorf("a session's profile is not the run's followed by\n%s\ngot the tail\n%s", want, sess.SBPL[max(0, len(sess.SBPL)-400):])
	}
	if strings.Contains(run.SBPL, "unix-socket") || strings.Contains(run.SBPL, quote(resolve(init))) {
		t.Error("a run's profile allows the session's socket or binary")
	}
	if _, err := Generate(plan, Params{ProxyPort: testPort, RunDir: f.run, Control: "relative.sock", Init: init}); err == nil {
		t.Error("a relative control socket path was written into a profile")
	}
}

// TestGateRules: with a gate socket the profile ends with reading the directory that
// stands in for sandbox.GateBinDir (listed among the private directories, so PATH moves
// there), executing cordon's binary and connecting to the gate socket; the environment
// names the socket.
func TestGateRules(t *testing.T) {
	f := newFixture(t)
	plan := f.plan(t, []byte("version: 1\n"))
	init, sock := filepath.Join(f.root, "bin", "cordon"), filepath.Join(f.run, "gate.sock")
	params := Params{ProxyPort: testPort, RunDir: f.run}
	host := sandbox.Host{GateSocket: sock, Init: init}
	sessionParams(&params, host)
	prof, err := Generate(plan, params)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(resolve(f.run), gateBin)
	want := "(allow file-read* (subpath " + quote(bin) + "))\n" +
		"(allow process-exec file-read* file-map-executable (literal " + quote(resolve(init)) + "))\n" +
		"(allow network-outbound (remote unix-socket (path-literal " + quote(resolve(sock)) + ")))\n"
	if !strings.HasSuffix(prof.SBPL, want) || strings.Contains(prof.SBPL, "control.sock") {
		t.Errorf("want the profile to end with\n%s\ngot the tail\n%s", want, prof.SBPL[max(0, len(prof.SBPL)-400):])
	}
	if !slices.Contains(prof.Dirs, PrivateDir{For: sandbox.GateBinDir, Host: bin}) {
		t.Errorf("no private directory for %s in %+v", sandbox.GateBinDir, prof.Dirs)
	}
	env := gateEnv(sandboxEnv([]string{"PATH=/usr/bin:" + sandbox.GateBinDir}, prof.Dirs, ""), host)
	for _, w := range []string{"PATH=/usr/bin:" + bin, wire.SocketEnv + "=" + sock} {
		if !slices.Contains(env, w) {
			t.Errorf("environment %q lacks %q", env, w)
		}
	}
}
