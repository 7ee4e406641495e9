package internal_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// hostRunCordon are the files that spell /run/cordon for the host's directory of that
// name (not the sandbox's): the run root and uid leases under it, the stager's mount
// point in its own mount namespace, and the host paths no contract may expose.
var hostRunCordon = map[string]bool{
	"contract/system.go":          true,
	"internal/handoff/handoff.go": true,
	"internal/uids/uids.go":       true,
}

// TestSandboxPathsNamedOnce: every path cordon mounts inside a sandbox is named in
// internal/paths (sandbox.go) and nowhere else: no other non-test file spells a
// string under /run/cordon (the host-side ones listed in hostRunCordon aside), and the
// seatbelt backend does not import creds to learn where secrets go.
func TestSandboxPathsNamedOnce(t *testing.T) {
	fset := token.NewFileSet()
	walkGo(t, func(path, dir string) {
		rel, _ := filepath.Rel(moduleRoot, path)
		rel = filepath.ToSlash(rel)
		if strings.HasSuffix(rel, "_test.go") || strings.HasPrefix(rel, "integration/") || strings.HasPrefix(rel, "internal/paths/") || hostRunCordon[rel] {
			return
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && (s == "/run/cordon" || strings.HasPrefix(s, "/run/cordon/")) {
				t.Errorf("%s: %q: name it in internal/paths (sandbox.go) and use that", fset.Position(lit.Pos()), s)
			}
			return true
		})
		if strings.HasPrefix(rel, "runner/seatbelt/") {
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == "github.com/cordonhq/cordon/creds" {
					t.Errorf("%s imports creds; the in-sandbox paths are internal/paths'", path)
				}
			}
		}
	})
}
