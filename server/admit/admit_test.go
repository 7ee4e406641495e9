package admit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cordonhq/cordon/contract"
)

// workspace makes a tenant's workspaces root and one workspace in it holding src/ and
// a Makefile, as the base in testdata names them.
func workspace(t testing.TB) (ws, root string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "workspaces")
	ws = filepath.Join(root, "w1")
	if err := os.MkdirAll(filepath.Join(ws, "src", "vendor"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "Makefile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return ws, root
}

func testBase(t *testing.T) *Base {
	t.Helper()
	data, err := os.ReadFile("testdata/base.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseBase("testdata/base.yaml", data)
	if err != nil {
		t.Fatalf("ParseBase: %v", err)
	}
	return b
}

func refused(t *testing.T, err error) *RefusedError {
	t.Helper()
	var r *RefusedError
	if !errors.As(err, &r) || !errors.Is(err, ErrRefused) {
		t.Fatalf("got %v; want a *RefusedError matching ErrRefused", err)
	}
	return r
}

// TestNarrowingAdmitted: a contract narrower than its base in every clause is admitted,
// and comes back compiled for the session's workspace.
func TestNarrowingAdmitted(t *testing.T) {
	ws, root := workspace(t)
	data, err := os.ReadFile("testdata/narrow.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Check(testBase(t), data, ws, root)
	if err != nil {
		t.Fatalf("narrowing refused: %v", err)
	}
	if got.Plan.Workspace != ws || got.Contract.File != RequestFile {
		t.Errorf("compiled for %q from %q; want %q from %q", got.Plan.Workspace, got.Contract.File, ws, RequestFile)
	}
	// The base itself is admitted too (equal is not wider): what runs when a tenant
	// sends no contract.
	for _, b := range []*Base{testBase(t), Default()} {
		if _, err := Check(b, b.YAML(), ws, root); err != nil {
			t.Errorf("the base itself refused: %v", err)
		}
	}
}

// base is testdata/base.yaml; each case changes one clause of it. The YAML is flow
// style so that each change sits on its own line: want is the tenant position the
// widening must be listed at.
const baseHead = `version: 1
filesystem: {writable: [src], readable: ["@system", /usr/share], deny_write: [Makefile, src/vendor]}
network: {allow: [{host: github.com, ports: [443]}, {host: "*.golang.org", ports: [443]}]}
credentials:
  - {name: TOKEN, provider: local, scope: {scopes: [read, write]}, ttl: 10m}
  - {name: MINT, provider: exec, scope: {mint: [/usr/local/bin/mint], revoke: ["true"]}, deliver: gate}
gates: [{name: push, run: [git, push], credential: MINT, timeout: 2m, why: release}]
monitor: {mode: required, on_violation: kill, exec: [/usr/bin/*]}
commands: {timeout: 5m, deny: ["git push *"]}
env: {pass: [TERM]}
limits: {memory: 2GiB, pids: 512, cpu: 2}
`

// with replaces line n (1-based) of baseHead by repl ("" removes it).
func with(n int, repl string) string {
	lines := strings.Split(baseHead, "\n")
	lines[n-1] = repl
	return strings.Join(lines, "\n")
}

// TestEachWideningRefused: every class of widening cordon diff knows is refused,
// listed as diff prints it, at its position in the tenant's contract.
func TestEachWideningRefused(t *testing.T) {
	ws, root := workspace(t)
	base := testBase(t)
	for _, tc := range []struct {
		name, yaml string
		want       string // a line of the error
	}{
		{"writable path added", with(2, `filesystem: {writable: [src, "."], readable: ["@system", /usr/share], deny_write: [Makefile, src/vendor]}`),
			"wider: filesystem: "},
		{"deny_write removed", with(2, `filesystem: {writable: [src], readable: ["@system", /usr/share], deny_write: [Makefile]}`),
			"wider: deny: "},
		{"git made writable", with(2, `filesystem: {writable: [src], readable: ["@system", /usr/share], deny_write: [Makefile, src/vendor], git: commit}`),
			"wider: git: "},
		{"egress host added", with(3, `network: {allow: [{host: github.com, ports: [443]}, {host: evil.example, ports: [443]}]}`),
			"new: request:contract:3:53]"},
		{"egress port added", with(3, `network: {allow: [{host: github.com, ports: [443, 22]}, {host: "*.golang.org", ports: [443]}]}`),
			"wider: network: "},
		{"credential added", with(6, `  - {name: MINT, provider: exec, scope: {mint: [/usr/local/bin/mint], revoke: ["true"]}, deliver: gate}
  - {name: MORE, provider: local, scope: {scopes: [read]}}`),
			"wider: credential: credential MORE is new (local, deliver: env (the default)) [old: absent, new: request:contract:7:5]"},
		{"credential scope wider", with(5, `  - {name: TOKEN, provider: local, scope: {scopes: [read, write, admin]}, ttl: 10m}`),
			"wider: credential: credential TOKEN: scope is wider, or changed in a way cordon cannot order [old: base:contract:13:5, new: request:contract:5:5]"},
		{"credential ttl longer", with(5, `  - {name: TOKEN, provider: local, scope: {scopes: [read, write]}, ttl: 1h}`),
			"wider: credential: credential TOKEN: ttl: 1h0m0s (was 10m0s)"},
		{"exec credential given a host variable", with(6, `  - {name: MINT, provider: exec, scope: {mint: [/usr/local/bin/mint], revoke: ["true"], env: [VAULT_TOKEN]}, deliver: gate}`),
			"wider: credential: credential MINT: scope is wider"},
		{"credential provider changed", with(5, `  - {name: TOKEN, provider: vault, scope: {scopes: [read, write]}, ttl: 10m}`),
			"wider: credential: credential TOKEN: provider vault (was local)"},
		{"gate timeout longer", with(7, `gates: [{name: push, run: [git, push], credential: MINT, timeout: 1h, why: release}]`),
			"wider: gate: gate push: timeout: 1h0m0s (was 2m0s) [old: base:contract:22:5, new: request:contract:7:9]"},
		{"gate and its credential removed (narrower)", strings.Replace(with(7, ""), "  - {name: MINT, provider: exec, scope: {mint: [/usr/local/bin/mint], revoke: [\"true\"]}, deliver: gate}\n", "", 1),
			""},
		{"gate approve deny (narrower)", with(7, `gates: [{name: push, run: [git, push], credential: MINT, timeout: 2m, approve: deny, why: release}]`),
			""},
		{"monitor off", with(8, `monitor: {mode: "off"}`), "wider: monitor: "},
		{"monitor alerts instead of killing", with(8, `monitor: {mode: required, on_violation: alert, exec: [/usr/bin/*]}`), "wider: monitor: "},
		{"monitor exec added", with(8, `monitor: {mode: required, on_violation: kill, exec: [/usr/bin/*, /tmp/*]}`), "wider: monitor: "},
		{"timeout raised", with(9, `commands: {timeout: 10m, deny: ["git push *"]}`),
			"wider: timeout: "},
		{"command deny removed", with(9, `commands: {timeout: 5m}`), "wider: commands: "},
		{"env pass added", with(10, `env: {pass: [TERM, MY_VAR]}`), "wider: env: "},
		{"env set added", with(10, `env: {pass: [TERM], set: {LD_PRELOAD: /x.so}}`), "wider: env: "},
		{"memory raised", with(11, `limits: {memory: 8GiB, pids: 512, cpu: 2}`),
			"wider: limits: "},
		{"pids unlimited", with(11, `limits: {memory: 2GiB, pids: unlimited, cpu: 2}`), "wider: limits: "},
		{"cpu dropped (unlimited)", with(11, `limits: {memory: 2GiB, pids: 512}`), "wider: limits: "},
		{"diff bound raised", with(11, `limits: {memory: 2GiB, pids: 512, cpu: 2, diff: {patch: 1GiB}}`), "wider: limits: "},
		{"image set", with(1, "version: 1\nimage: alpine:3"), "wider: image: "},
		{"pull missing", with(1, "version: 1\npull: missing"), "wider: image: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(base, []byte(tc.yaml), ws, root)
			if tc.want == "" { // a narrowing, for contrast
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			r := refused(t, err)
			if len(r.Widenings) == 0 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got:\n%v\nwant a line with %q", err, tc.want)
			}
			for _, w := range r.Widenings {
				if !w.Wider || (w.New == "" && w.Old == "") {
					t.Errorf("%v: not a located widening", w)
				}
				if w.New != "" && !strings.HasPrefix(w.New, RequestFile) {
					t.Errorf("%v: new side not in the tenant's contract", w)
				}
			}
		})
	}
}

// TestEveryWideningListed: a contract wider in three ways is refused with all three,
// each at its own line, and the error says how many.
func TestEveryWideningListed(t *testing.T) {
	ws, root := workspace(t)
	y := with(3, `network: {allow: [{host: github.com, ports: [443]}, {host: "*.golang.org", ports: [443]}, {host: x.example, ports: [80]}]}`)
	y = strings.Replace(y, "timeout: 5m", "timeout: 6m", 1)
	y = strings.Replace(y, "memory: 2GiB", "memory: 3GiB", 1)
	_, err := Check(testBase(t), []byte(y), ws, root)
	r := refused(t, err)
	if len(r.Widenings) != 3 {
		t.Fatalf("got %d widenings, want 3:\n%v", len(r.Widenings), err)
	}
	for _, want := range []string{"3 widenings over the tenant's base contract",
		"new: request:contract:3:", "new: request:contract:9:", "new: request:contract:11:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "testdata/") {
		t.Errorf("the base's host path is shown to the tenant:\n%v", err)
	}
}

// TestDefaultBase: without base_contract the built-in default is the base: the
// smallest contract is admitted, and any network or credential is a widening.
func TestDefaultBase(t *testing.T) {
	ws, root := workspace(t)
	if _, err := Check(Default(), []byte("version: 1\n"), ws, root); err != nil {
		t.Fatalf("version: 1 refused: %v", err)
	}
	_, err := Check(Default(), []byte("version: 1\nnetwork: {allow: [{host: example.com, ports: [443]}]}\n"), ws, root)
	if r := refused(t, err); len(r.Widenings) != 1 || !strings.Contains(r.Widenings[0].New, "request:contract:2:") {
		t.Errorf("got %v", err)
	}
}

// TestStrictDecoding: what the contract parser refuses is refused with its position
// in the request, never compiled.
func TestStrictDecoding(t *testing.T) {
	ws, root := workspace(t)
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "version: 1\nnetwrok: {}\n", "request:contract:2:1: "},
		{"alias", "version: 1\nenv: {pass: &p [TERM]}\nx: *p\n", "request:contract:"},
		{"alias only", "version: 1\nenv: {pass: &p [TERM], set: {A: *p}}\n", "request:contract:2:"},
		{"two documents", "version: 1\n---\nversion: 1\n", "request:contract:2:1: a contract is one YAML document"},
		{"wrong version", "version: 2\n", "request:contract:1:10: "},
		{"empty", "", "request:contract"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Check(Default(), []byte(tc.yaml), ws, root)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v; want ErrInvalid at %q", err, tc.want)
			}
		})
	}
	if _, err := Check(Default(), make([]byte, MaxContract+1), ws, root); !errors.Is(err, ErrInvalid) {
		t.Errorf("a contract over MaxContract: %v", err)
	}
}

// TestBadCallsRefused: a nil base or a workspace that is not below the tenant's root
// is the server's mistake, refused before the contract is read.
func TestBadCallsRefused(t *testing.T) {
	ws, root := workspace(t)
	y := []byte("version: 1\n")
	other := t.TempDir()
	link := filepath.Join(root, "link")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		base     *Base
		ws, root string
	}{
		{"nil base", nil, ws, root},
		{"zero base", &Base{}, ws, root},
		{"workspace is the root", Default(), root, root},
		{"workspace outside the root", Default(), other, root},
		{"workspace through a link out", Default(), link, root},
		{"relative workspace", Default(), "w1", root},
		{"unclean workspace", Default(), root + "/w1/../w1", root},
		{"missing workspace", Default(), filepath.Join(root, "nope"), root},
	} {
		if _, err := Check(tc.base, y, tc.ws, tc.root); err == nil || errors.Is(err, ErrInvalid) || errors.Is(err, ErrRefused) {
			t.Errorf("%s: got %v; want the caller's error", tc.name, err)
		}
	}
}

// TestParseBase: a base that does not decode or compile is refused at its own
// FILE:LINE:COL, and so is one naming a workspace.
func TestParseBase(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "version: 1\nfoo: 1\n", "b.yaml:2:1: "},
		{"does not compile", "version: 1\nmonitor: {mode: sometimes}\n", "b.yaml:2:17: monitor.mode"},
		{"missing path", "version: 1\nfilesystem: {readable: [/nonexistent/x]}\n", "b.yaml:2:25: "},
		{"names a workspace", "version: 1\nworkspace: /srv\n", "b.yaml:2:12: workspace: a base contract names no workspace"},
	} {
		if _, err := ParseBase("b.yaml", []byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v; want %q", tc.name, err, tc.want)
		}
	}
}

// TestConcurrentChecks: Check shares the base between requests without changing it.
func TestConcurrentChecks(t *testing.T) {
	ws, root := workspace(t)
	base := testBase(t)
	narrow, _ := os.ReadFile("testdata/narrow.yaml")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			y := narrow
			if i%2 == 1 {
				y = []byte(with(11, `limits: {memory: 8GiB, pids: 512, cpu: 2}`))
			}
			_, err := Check(base, y, ws, root)
			if (err == nil) != (i%2 == 0) {
				t.Errorf("check %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if base.c.File != "testdata/base.yaml" || base.c.Workspace.Value != "" {
		t.Errorf("the base was changed: file %q, workspace %q", base.c.File, base.c.Workspace.Value)
	}
	_ = contract.Default
}
