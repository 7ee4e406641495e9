package internal_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the module path with a trailing slash.
const module = "github.com/cordonhq/cordon/"

// moduleRoot is the repository root, two levels up from this file's package.
const moduleRoot = ".."

// walkGo calls fn for every non-generated Go file of the module.
func walkGo(t *testing.T, fn func(path string, pkgDir string)) {
	t.Helper()
	err := filepath.WalkDir(moduleRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != moduleRoot || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			fn(p, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDependencyRules: x/sys/unix is imported only by internal/linux (every system
// call behind one named function there), the policy packages never import
// cilium/ebpf (they must build and be tested without BPF), and no package under
// internal/ imports one outside it: internal/ is the ground, and no import runs up.
// The model SDKs are imported only by harness/ and examples/.
func TestDependencyRules(t *testing.T) {
	fset := token.NewFileSet()
	walkGo(t, func(path, dir string) {
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(moduleRoot, dir)
		top := strings.Split(filepath.ToSlash(rel), "/")[0]
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "golang.org/x/sys/unix" && filepath.ToSlash(rel) != "internal/linux" {
				t.Errorf("%s imports x/sys/unix; go through internal/linux", path)
			}
			if strings.HasPrefix(p, "github.com/cilium/ebpf") && (top == "contract" || top == "egress" || top == "creds" || top == "audit") {
				t.Errorf("%s imports %s; %s must not depend on BPF", path, p, top)
			}
			if (strings.HasPrefix(p, "github.com/anthropics/") || strings.HasPrefix(p, "github.com/openai/")) && top != "harness" && top != "examples" {
				t.Errorf("%s imports %s; the model SDKs stay in harness/ (cordon itself calls no model)", path, p)
			}
			if top == "internal" && !strings.HasSuffix(path, "_test.go") && strings.HasPrefix(p, module) && !strings.HasPrefix(p, module+"internal/") {
				t.Errorf("%s imports %s; internal/ is the ground and imports nothing above it", path, p)
			}
		}
	})
}

// TestOneDoorToTheKernel: package syscall is the other door to the kernel, so outside
// internal/linux it is used only for its types and constants (Errno, Signal, SIGxxx,
// Exxx, O_xxx, WaitStatus, Stat_t, SysProcAttr for os/exec, ...): every system call
// (a use of one of its functions, called or not) is made in internal/linux, behind a
// named function, so the kernel surface is one package to review. A conversion such as syscall.Signal(n) names a type
// and is allowed. Test files are held to it too; testdata is not walked: the attack
// programs under integration/testdata make raw system calls on purpose, as a
// workload would, and are not part of cordon.
func TestOneDoorToTheKernel(t *testing.T) {
	sys, err := importer.Default().Import("syscall")
	if err != nil {
		t.Fatalf("loading package syscall: %v", err)
	}
	fset := token.NewFileSet()
	walkGo(t, func(path, dir string) {
		if rel, _ := filepath.Rel(moduleRoot, dir); filepath.ToSlash(rel) == "internal/linux" {
			return
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range syscallNames(f) {
			if name == "." {
				t.Errorf("%s imports syscall with a dot; name what it uses", path)
			}
			for _, sel := range syscallFuncs(f, name, sys.Scope()) {
				t.Errorf("%s: syscall.%s is a system call; make it in internal/linux", fset.Position(sel.Pos()), sel.Sel.Name)
			}
		}
	})
}

// syscallNames is the names under which f imports package syscall.
func syscallNames(f *ast.File) []string {
	var names []string
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p != "syscall" {
			continue
		}
		switch {
		case imp.Name == nil:
			names = append(names, "syscall")
		case imp.Name.Name == "_":
		default:
			names = append(names, imp.Name.Name)
		}
	}
	return names
}

// syscallFuncs lists the selectors name.X in f where X is not a type, constant or
// variable of package syscall (a function, or a name this GOOS's syscall lacks).
func syscallFuncs(f *ast.File, name string, scope *types.Scope) []*ast.SelectorExpr {
	var out []*ast.SelectorExpr
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
			switch scope.Lookup(sel.Sel.Name).(type) {
			case *types.TypeName, *types.Const, *types.Var:
			default:
				out = append(out, sel)
			}
		}
		return true
	})
	return out
}

// TestPackageDocs: every package has a doc comment ("Package NAME ..."), which godoc and a newcomer read first.
func TestPackageDocs(t *testing.T) {
	fset := token.NewFileSet()
	documented := map[string]bool{}
	seen := map[string]bool{}
	walkGo(t, func(path, dir string) {
		if strings.HasSuffix(path, "_test.go") {
			return
		}
		f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		seen[dir] = true
		if f.Doc != nil && strings.HasPrefix(f.Doc.Text(), "Package "+f.Name.Name) || f.Name.Name == "main" && f.Doc != nil {
			documented[dir] = true
		}
	})
	for dir := range seen {
		if !documented[dir] {
			t.Errorf("package in %s has no doc comment (\"Package NAME ...\")", dir)
		}
	}
}

// TestBinaryDependencies: what each binary, and each package whose graph is a rule,
// links, by `go list -deps`; a failure names the import chain that breaks the rule.
//   - cordon-init, process 1 in every sandbox, links neither the proxy's HTTP and TLS
//     stacks nor the engine clients, BPF, YAML or the host-side packages (it starts on
//     every run and is the sandbox's own attack surface);
//   - the cordon command built without engines links no engine client (nor Kubernetes');
//   - the kubernetes placement is held to the backends' rule, and its pure compiler
//     (podspec) links no Kubernetes client;
//   - cordon-exec, the client a harness runs for every command of a warm session,
//     links none of what only the host side needs (the runner, cobra, YAML, BPF,
//     net/http, the engine clients): every package it links costs page faults at start;
//   - runner/sandbox and every backend (seatbelt and cordon-init listed for darwin too) reach none of the run-time services (egress proxy,
//     credentials, gates, audit, monitor, BPF) nor the runner that orchestrates them: a
//     backend only translates a plan into its mechanism.
//
// A banned path P bans the package P itself; P/... bans P and every package below it.
func TestBinaryDependencies(t *testing.T) {
	const m = "github.com/cordonhq/cordon/"
	backendBans := []string{m + "runner", m + "gate", m + "egress", m + "creds/...", m + "monitor/...", m + "audit/...", "github.com/cilium/ebpf/..."}
	for _, b := range []struct {
		pkg, tags string
		banned    []string
		allowed   []string // below a banned P/..., yet allowed
		goos      string   // the GOOS to list for; empty is the host's
	}{
		{"./cmd/cordon-init", "", []string{"net/http/...", "crypto/tls/...", "crypto/x509/...", "github.com/cilium/ebpf/...", "github.com/docker/...",
			"github.com/containerd/...", "gopkg.in/yaml.v3/...", m + "egress/...", m + "runner/...", m + "contract/...", m + "creds/...",
			m + "monitor/...", m + "audit/...", "github.com/spf13/..."}, nil, ""},
		// The noengines build is the one a warm `cordon exec` starts: no engine client and
		// no server (its metrics library's init alone costs a millisecond), which
		// cordon-engines runs instead.
		{"./cmd/cordon", "noengines", []string{"github.com/docker/...", "github.com/containerd/...", "github.com/prometheus/...", "k8s.io/...",
			m + "server", m + "server/auth", m + "server/config", m + "server/admit", m + "server/quota"}, nil, ""},
		{"./cmd/cordon-exec", "", []string{m + "runner/...", m + "contract/...", m + "audit/...", m + "egress/...", m + "monitor/...", m + "cli",
			"github.com/spf13/...", "gopkg.in/yaml.v3/...", "github.com/cilium/ebpf/...", "net/http/...", "crypto/tls/...",
			"github.com/docker/...", "github.com/containerd/..."}, nil, ""},
		{"./session", "", []string{m + "runner/...", "github.com/spf13/...", "gopkg.in/yaml.v3/..."}, nil, ""},
		{"./runner/sandbox", "", backendBans, nil, ""},
		{"./runner/bwrap", "", backendBans, nil, ""},
		{"./runner/container", "", backendBans, nil, ""},
		{"./runner/docker", "", backendBans, nil, ""},
		{"./runner/containerd", "", backendBans, nil, ""},
		{"./runner/seatbelt", "", backendBans, nil, "darwin"},
		// The kubernetes placement is a backend too: it compiles and places, nothing more.
		{"./placement/kubernetes/podspec", "", slices.Concat(backendBans, []string{"k8s.io/client-go/..."}), nil, ""},
		{"./placement/kubernetes", "", backendBans, nil, ""},
		{"./runner/kubernetes", "", backendBans, nil, ""},
		{"./cmd/cordon-init", "", []string{"net/http/...", "crypto/tls/...", "crypto/x509/...", "github.com/cilium/ebpf/...", "github.com/docker/...",
			"github.com/containerd/...", "gopkg.in/yaml.v3/...", m + "egress/...", m + "runner/...", m + "contract/...", m + "creds/...",
			m + "monitor/...", m + "audit/...", "github.com/spf13/..."}, nil, "darwin"},
	} {
		root, imports := depGraph(t, b.pkg, b.tags, b.goos)
		for _, dep := range slices.Sorted(maps.Keys(imports)) {
			if bannedDep(dep, b.banned, b.allowed) {
				t.Errorf("%s (tags %q, GOOS %q) links %s: %s", b.pkg, b.tags, b.goos, dep, strings.Join(importChain(root, dep, imports), " -> "))
			}
		}
	}
}

// TestEventSchemaDependencies: the event schema, which every emitter imports, depends on
// nothing of cordon's, and the emitters reach neither the audit log's format nor the
// runner (only audit knows the file format). The run's event tally (runner/tally)
// depends on nothing of cordon's but the schema: it is pure bookkeeping of events.
func TestEventSchemaDependencies(t *testing.T) {
	const mod = "github.com/cordonhq/cordon/"
	for pkg, banned := range map[string][]string{
		"./internal/event": {mod},
		"./runner/tally":   {mod},
		"./egress":         {mod + "audit", mod + "runner"},
		"./creds":          {mod + "audit", mod + "runner"},
		"./monitor":        {mod + "audit", mod + "runner"},
		"./gate":           {mod + "audit", mod + "runner"},
	} {
		cmd := exec.Command("go", "list", "-deps", pkg)
		cmd.Dir = moduleRoot
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		self := mod + strings.TrimPrefix(pkg, "./")
		for _, dep := range strings.Fields(string(out)) {
			for _, ban := range banned {
				if dep != mod+"internal/event" && dep != self && (dep == ban || strings.HasPrefix(dep, strings.TrimSuffix(ban, "/")+"/")) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}

// bannedDep reports whether dep matches a banned path (P, or P/... for P and below)
// and no allowed one.
func bannedDep(dep string, banned, allowed []string) bool {
	if slices.Contains(allowed, dep) {
		return false
	}
	for _, ban := range banned {
		p, tree := strings.CutSuffix(ban, "/...")
		if dep == p || tree && strings.HasPrefix(dep, p+"/") {
			return true
		}
	}
	return false
}

// depGraph returns the import path of pkg and, for it and every package it depends
// on, the packages it imports, by `go list -deps`.
func depGraph(t *testing.T, pkg, tags, goos string) (string, map[string][]string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go list needs the go tool on PATH: %v", err)
	}
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(goTool, append(args, pkg)...)
	cmd.Dir = moduleRoot
	if goos != "" {
		cmd.Env = append(os.Environ(), "GOOS="+goos)
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	imports := map[string][]string{}
	root := ""
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		root = f[0] // -deps lists a package after its dependencies: pkg comes last
		imports[f[0]] = f[1:]
	}
	return root, imports
}

// importChain returns a shortest chain of imports from root to dep.
func importChain(root, dep string, imports map[string][]string) []string {
	via := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == dep {
			var chain []string
			for ; p != ""; p = via[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, q := range imports[p] {
			if _, seen := via[q]; !seen {
				via[q] = p
				queue = append(queue, q)
			}
		}
	}
	return []string{root, "?", dep}
}
