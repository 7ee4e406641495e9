package contract

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// diffWorld is a host for comparing contracts: a workspace root/ws, a home root/home
// (with .ssh), and root/srv/{a,x} outside both.
func diffWorld(t *testing.T) (root string) {
	t.Helper()
	root = realTempDir(t)
	for _, d := range []string{"ws/.git", "ws/secrets", "home/.ssh", "srv/a", "srv/x"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "ws/secrets/k.pem"), []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	return root
}

// compileAs writes yaml to root/ws/name and compiles it for the diffWorld host.
func compileAs(t *testing.T, root, name, yaml string) Compiled {
	t.Helper()
	ws := filepath.Join(root, "ws")
	f := filepath.Join(ws, name)
	if err := os.WriteFile(f, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	p, err := Compile(c, testHost(t, ws))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return Compiled{Contract: c, Plan: p}
}

// describe formats a change for the table below: "wider KIND: WHAT" or "narrower …",
// with ROOT in place of the temporary directory.
func describe(ch Change, root string) string {
	dir := "narrower"
	if ch.Wider {
		dir = "wider"
	}
	return dir + " " + ch.Kind.String() + ": " + strings.ReplaceAll(ch.What, root, "ROOT")
}

const v1 = "version: 1\n"

// gateYAML declares a gate push with the given extra lines, and its credential.
func gateYAML(deliver, gate string) string {
	return v1 + "credentials:\n  - {name: PUSH, provider: github-app, deliver: " + deliver +
		", scope: {repositories: [app], permissions: {contents: write}}, why: push}\n" +
		"gates:\n  - {name: push, run: [git, push, origin, HEAD], why: publish" + gate + "}\n"
}

// compareCase is a row of the TestCompare tables: two contracts and the changes
// Compare must report between them.
type compareCase struct {
	name     string
	old, new string
	want     []string // in order; each a prefix of describe's line
}

// compareFilesystem are the TestCompare cases for filesystem: grants, denies, widen and git.
var compareFilesystem = []compareCase{
	{name: "same", old: v1, new: v1 + "# reworded, same rules\nname: other\n"},
	{name: "same lists reordered", old: v1 + "filesystem:\n  readable: ['@system', ../srv/a, ../srv/x]\n",
		new: v1 + "filesystem:\n  readable: [../srv/x, '@system', ../srv/a]\n"},
	{name: "new readable path", old: v1, new: v1 + "filesystem:\n  readable: ['@system', ../srv]\n",
		want: []string{"wider filesystem: ROOT/srv is read-only (was "}},
	{name: "containing directory", old: v1 + "filesystem:\n  readable: ['@system', ../srv/a]\n",
		new:  v1 + "filesystem:\n  readable: ['@system', ../srv]\n",
		want: []string{"wider filesystem: ROOT/srv is read-only (was "}},
	{name: "grant inside a granted directory", old: v1 + "filesystem:\n  readable: ['@system', ../srv]\n",
		new: v1 + "filesystem:\n  readable: ['@system', ../srv, ../srv/a]\n"},
	{name: "read-only to writable", old: v1 + "filesystem:\n  readable: ['@system', ../srv]\n",
		new:  v1 + "filesystem:\n  readable: ['@system', ../srv]\n  writable: [., ../srv/a]\n",
		want: []string{"wider filesystem: ROOT/srv/a is writable (was read-only)"}},
	{name: "path removed", old: v1 + "filesystem:\n  readable: ['@system', ../srv]\n", new: v1,
		want: []string{"narrower filesystem: ROOT/srv is "}},
	{name: "workspace read-only", old: v1, new: v1 + "filesystem:\n  writable: []\n",
		want: []string{"narrower filesystem: ROOT/ws is read-only (was writable)"}},
	{name: "deny_read removed", old: v1 + "filesystem:\n  deny_read: [secrets]\n", new: v1,
		want: []string{"wider filesystem: ROOT/ws/secrets is writable (was hidden)", `wider deny: filesystem.deny_read "secrets" is gone`}},
	{name: "deny_read lowered to deny_write", old: v1 + "filesystem:\n  deny_read: [secrets]\n",
		new: v1 + "filesystem:\n  deny_write: [secrets]\n",
		want: []string{"wider filesystem: ROOT/ws/secrets is read-only (was hidden)",
			`wider deny: filesystem.deny_read "secrets" is gone`}}, // deny_write adds nothing to hidden
	{name: "deny glob that matches nothing yet", old: v1 + "filesystem:\n  deny_read: ['**/*.key']\n", new: v1,
		want: []string{`wider deny: filesystem.deny_read "**/*.key" is gone`}},
	{name: "deny spelled differently", old: v1 + "filesystem:\n  deny_read: [secrets]\n",
		new: v1 + "filesystem:\n  deny_read: [./secrets/]\n"},
	{name: "deny covered by a wider deny", old: v1 + "filesystem:\n  deny_read: [secrets/k.pem]\n",
		new:  v1 + "filesystem:\n  deny_read: [secrets]\n",
		want: []string{"narrower filesystem: ROOT/ws/secrets is hidden (was writable)", `narrower deny: filesystem.deny_read "secrets" is new`}},
	{name: "deny of a path no longer granted", old: v1 + "filesystem:\n  readable: ['@system', ../srv]\n  deny_read: [../srv/x]\n",
		new: v1, want: []string{"narrower filesystem: ROOT/srv is "}},
	{name: "new widen entry", old: v1, new: v1 + "filesystem:\n  widen:\n    - {path: ~/.ssh, why: deploy keys}\n",
		want: []string{"wider widen: filesystem.widen exposes protected ROOT/home/.ssh read-only (deploy keys)"}},
	{name: "widen raised to write", old: v1 + "filesystem:\n  widen:\n    - {path: ~/.ssh, why: keys}\n",
		new:  v1 + "filesystem:\n  widen:\n    - {path: ~/.ssh, access: write, why: keys}\n",
		want: []string{"wider widen: filesystem.widen: protected ROOT/home/.ssh is writable (was read-only)"}},
	{name: "widen lowered to read", old: v1 + "filesystem:\n  widen:\n    - {path: ~/.ssh, access: write, why: keys}\n",
		new:  v1 + "filesystem:\n  widen:\n    - {path: ~/.ssh, why: keys}\n",
		want: []string{"narrower widen: filesystem.widen: protected ROOT/home/.ssh is read-only (was writable)"}},
	{name: "widen removed", old: v1 + "filesystem:\n  widen:\n    - {path: ~/.ssh, why: keys}\n", new: v1,
		want: []string{"narrower widen: filesystem.widen no longer exposes protected ROOT/home/.ssh"}},
	{name: "git commit", old: v1, new: v1 + "filesystem:\n  git: commit\n",
		want: []string{"wider git: filesystem.git: commit (was read-only)"}},
	{name: "git back to read-only", old: v1 + "filesystem:\n  git: commit\n", new: v1 + "filesystem:\n  git: read-only\n",
		want: []string{"narrower git: filesystem.git: read-only (was commit)"}},
}

// compareNetwork are the TestCompare cases for network.allow.
var compareNetwork = []compareCase{
	{name: "wildcard host", old: v1 + "network:\n  allow: [{host: api.example.com}]\n",
		new:  v1 + "network:\n  allow: [{host: '*.example.com'}]\n",
		want: []string{"wider network: network.allow allows *.example.com on ports 80, 443"}},
	{name: "wildcard covers a name", old: v1 + "network:\n  allow: [{host: '*.example.com'}]\n",
		new:  v1 + "network:\n  allow: [{host: API.Example.com.}, {host: '*.b.example.com'}]\n",
		want: []string{"narrower network: network.allow no longer allows *.example.com"}},
	{name: "more ports", old: v1 + "network:\n  allow: [{host: example.com}]\n",
		new:  v1 + "network:\n  allow: [{host: example.com, ports: [443, 8080]}]\n",
		want: []string{"wider network: network.allow allows example.com on port 8080", "narrower network: network.allow no longer allows example.com on port 80"}},
	{name: "wider cidr", old: v1 + "network:\n  allow: [{cidr: 10.1.0.0/16, ports: [5432]}]\n",
		new:  v1 + "network:\n  allow: [{cidr: 10.0.0.0/8, ports: [5432]}]\n",
		want: []string{"wider network: network.allow allows 10.0.0.0/8 on port 5432"}},
	{name: "new rule", old: v1, new: v1 + "network:\n  allow: [{host: proxy.golang.org, why: modules}]\n",
		want: []string{"wider network: network.allow allows proxy.golang.org on ports 80, 443"}},
}

// compareCredentialsGates are the TestCompare cases for credentials and gates.
var compareCredentialsGates = []compareCase{
	{name: "new credential", old: v1, new: v1 + "credentials:\n  - {name: TOK, provider: local, scope: {scopes: [read]}}\n",
		want: []string{"wider credential: credential TOK is new (local, deliver: env (the default))"}},
	{name: "credential scope and ttl", old: v1 + "credentials:\n  - {name: TOK, provider: local, ttl: 10m, scope: {scopes: [read, write]}}\n",
		new:  v1 + "credentials:\n  - {name: TOK, provider: local, scope: {scopes: [read]}}\n",
		want: []string{"wider credential: credential TOK: ttl: 1h0m0s (was 10m0s)", "narrower credential: credential TOK: scope is narrower"}},
	{name: "credential permission raised", old: gateYAML("gate", ", credential: PUSH"),
		new:  strings.Replace(gateYAML("gate", ", credential: PUSH"), "contents: write", "contents: admin", 1),
		want: []string{"wider credential: credential PUSH: scope is wider"}},
	{name: "credential proxy hosts", old: v1 + "credentials:\n  - {name: API, provider: exec, deliver: proxy, hosts: [a.example.com]}\n",
		new:  v1 + "credentials:\n  - {name: API, provider: exec, deliver: proxy, hosts: [a.example.com, b.example.com]}\n",
		want: []string{"wider credential: credential API: also goes to b.example.com"}},
	{name: "gate credential delivered to the sandbox", old: gateYAML("gate", ", credential: PUSH"), new: gateYAML("env", ""),
		want: []string{"wider credential: credential PUSH: deliver: env (was gate)", "narrower gate: gate push: no longer gets credential PUSH"}},
	{name: "new gate", old: v1, new: v1 + "gates:\n  - {name: tag, run: [git, push, origin, v1], why: release}\n",
		want: []string{`wider gate: gate tag is new: runs ["git" "push" "origin" "v1"] on the host (approve: human)`}},
	{name: "gate argv and timeout", old: gateYAML("gate", ", credential: PUSH, timeout: 1m"),
		new:  strings.Replace(gateYAML("gate", ", credential: PUSH, timeout: 10m"), "origin", "--force", 1),
		want: []string{`wider gate: gate push: runs ["git" "push" "--force" "HEAD"]`, "wider gate: gate push: timeout: 10m0s (was 1m0s)"}},
	{name: "gate approve deny", old: gateYAML("gate", ", credential: PUSH"), new: gateYAML("gate", ", credential: PUSH, approve: deny"),
		want: []string{"narrower gate: gate push: approve: deny (was human)"}},
	{name: "gate approve human", old: gateYAML("gate", ", credential: PUSH, approve: deny"), new: gateYAML("gate", ", credential: PUSH"),
		want: []string{"wider gate: gate push: approve: human (was deny)"}},
}

// compareOther are the TestCompare cases for monitor, limits, timeout, commands, env and image.
var compareOther = []compareCase{
	{name: "monitor weakened", old: v1 + "monitor: {mode: required, on_violation: kill, exec: [go]}\n",
		new: v1 + "monitor: {mode: best-effort, exec: [go, sh]}\n",
		want: []string{"wider monitor: monitor.mode: best-effort (was required)", "wider monitor: monitor.on_violation: alert (was kill)",
			`wider monitor: monitor.exec allows "sh"`}},
	{name: "monitor turned on", old: v1, new: v1 + "monitor: {mode: required, exec: [sh]}\n",
		want: []string{"narrower monitor: monitor.mode: required (was off)"}},
	{name: "limits", old: v1 + "limits: {memory: 1GiB, pids: 100, cpu: 2}\n", new: v1 + "limits: {memory: 2GiB, cpu: 1}\n",
		want: []string{"wider limits: limits.memory: 2GiB (was 1GiB)", "wider limits: limits.pids: 4096 (was 100)",
			"narrower limits: limits.cpu: 1 CPU (was 2 CPUs)"}},
	// The defaults bound a contract that sets no limits; lifting one is a widening.
	{name: "limits lifted", old: v1, new: v1 + "limits: {memory: unlimited, pids: unlimited}\n",
		want: []string{"wider limits: limits.memory: unlimited (was 4GiB)", "wider limits: limits.pids: unlimited (was 4096)"}},
	{name: "diff limits", old: v1, new: v1 + "limits: {diff: {entries: 1000000, hash_file: 2GiB, patch: 1MiB, time: 10m}}\n",
		want: []string{"wider limits: limits.diff.entries: 1000000 (was 100000)",
			"wider limits: limits.diff.hash_file: 2GiB (was 1GiB)", "wider limits: limits.diff.time: 10m0s (was 1m0s)",
			"narrower limits: limits.diff.patch: 1MiB (was 16MiB)"}},
	{name: "timeout", old: v1, new: v1 + "commands: {timeout: 10m}\n",
		want: []string{"wider timeout: commands.timeout: 10m0s (was 1m0s)"}},
	{name: "commands.deny", old: v1 + "commands: {deny: ['curl *', 'git  push *']}\n", new: v1 + "commands: {deny: ['git push *', 'wget *']}\n",
		want: []string{`wider commands: commands.deny "curl *" is gone`, `narrower commands: commands.deny "wget *" is new`}},
	{name: "env", old: v1 + "env: {pass: [GOFLAGS, CI], set: {A: '1', B: '2'}}\n", new: v1 + "env: {pass: [GOFLAGS, GOPATH], set: {A: '1', B: '3', C: '4'}}\n",
		want: []string{"wider env: env.pass: the caller's GOPATH enters the sandbox", "wider env: env.set: B has another value",
			"wider env: env.set: C is set", "narrower env: env.pass: the caller's CI no longer enters the sandbox"}},
	{name: "image and pull", old: v1 + "image: debian:12\n", new: v1 + "image: debian:13\npull: missing\n",
		want: []string{`wider image: image: "debian:13" (was "debian:12")`, "wider image: pull: missing (was never)"}},
}

// TestCompare runs every compare* table; subtest names are the case names.
func TestCompare(t *testing.T) {
	tables := [][]compareCase{compareFilesystem, compareNetwork, compareCredentialsGates, compareOther}
	for _, tt := range slices.Concat(tables...) {
		t.Run(tt.name, func(t *testing.T) { checkCompare(t, tt) })
	}
}

// checkCompare compiles tt.old and tt.new, and checks what Compare reports and Wider.
func checkCompare(t *testing.T, tt compareCase) {
	root := diffWorld(t)
	old, new := compileAs(t, root, "old.yaml", tt.old), compileAs(t, root, "cordon.yaml", tt.new)
	changes := Compare(old, new)
	var got []string
	for _, ch := range changes {
		got = append(got, describe(ch, root))
	}
	ok := len(got) == len(tt.want)
	for i := 0; ok && i < len(got); i++ {
		ok = strings.HasPrefix(got[i], tt.want[i])
	}
	if !ok {
		t.Errorf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(tt.want, "\n\t"))
	}
	wantWider := false
	for _, w := range tt.want {
		wantWider = wantWider || strings.HasPrefix(w, "wider")
	}
	if Wider(changes) != wantWider {
		t.Errorf("Wider = %v, want %v", Wider(changes), wantWider)
	}
}

// Each change names where its rule is written in each file, and "" where it is absent.
func TestComparePositions(t *testing.T) {
	root := diffWorld(t)
	old := compileAs(t, root, "old.yaml", v1+"filesystem:\n  readable: ['@system', ../srv]\nlimits: {pids: 10}\n")
	new := compileAs(t, root, "cordon.yaml", v1+"filesystem:\n  readable: ['@system', ../srv]\n  writable:\n    - .\n    - ../srv/a\n"+
		"network:\n  allow:\n    - {host: example.com}\n")
	ws := filepath.Join(root, "ws")
	want := map[string][2]string{
		"filesystem": {ws + "/old.yaml:3:25", ws + "/cordon.yaml:6:7"},
		"network":    {"", ws + "/cordon.yaml:9:7"},
		"limits":     {ws + "/old.yaml:4:9", ""},
	}
	changes := Compare(old, new)
	if len(changes) != len(want) {
		t.Fatalf("got %d changes, want %d: %+v", len(changes), len(want), changes)
	}
	for _, ch := range changes {
		if w := want[ch.Kind.String()]; ch.Old != w[0] || ch.New != w[1] {
			t.Errorf("%s %q: at %q, %q; want %q, %q", ch.Kind, ch.What, ch.Old, ch.New, w[0], w[1])
		}
	}
}

// A change in a field Compare does not know about would go unreported: every field of
// Plan and Contract, and of the types of this package they hold, must be in classified,
// and everything classified must exist.
func TestEveryFieldClassified(t *testing.T) {
	known := map[string]bool{}
	for _, f := range classified {
		if known[f.name] {
			t.Errorf("%s is classified twice", f.name)
		}
		known[f.name] = true
	}
	seen := map[string]bool{}
	pkg := reflect.TypeFor[Plan]().PkgPath()
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || ty.PkgPath() != pkg || seen[ty.Name()] {
			return
		}
		seen[ty.Name()] = true
		if ty == reflect.TypeFor[Str]() || ty == reflect.TypeFor[Pos]() {
			return // a value and where it was written: classified where it is used
		}
		for i := range ty.NumField() {
			f := ty.Field(i)
			name := ty.Name() + "." + f.Name
			if !known[name] {
				t.Errorf("%s is not classified: add it to classified in widen.go (and compare it if it can widen)", name)
			}
			delete(known, name)
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[Plan]())
	walk(reflect.TypeFor[Contract]())
	for name := range known {
		t.Errorf("classified names %s, which does not exist", name)
	}
	for _, f := range classified {
		if f.how == "" {
			t.Errorf("%s: say how it is compared", f.name)
		}
	}
}

func TestChangeKindString(t *testing.T) {
	for k := KindFilesystem; k <= KindImage; k++ {
		if s := k.String(); strings.HasPrefix(s, "ChangeKind(") {
			t.Errorf("kind %d has no name", int(k))
		}
	}
	if s := fmt.Sprint(KindImage + 1); s != "ChangeKind(13)" {
		t.Errorf("an unknown kind prints %q", s)
	}
}
