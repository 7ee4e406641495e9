package internal_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

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

// TestOneDoorToTheKernel: x/sys/unix is imported only by internal/linux (STYLE rule 6),
// and the policy packages never import cilium/ebpf (rule 7).
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
		}
	})
}

// TestPackageDocs: every package has a doc comment (STYLE rule 44).
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
