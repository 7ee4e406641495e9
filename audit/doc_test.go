package audit

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestPackageDocs checks that audit and its subpackages have a package doc comment.
func TestPackageDocs(t *testing.T) {
	for _, dir := range []string{".", "fsdiff"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		documented := false
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.PackageClauseOnly|parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			documented = documented || f.Doc != nil
		}
		if !documented {
			t.Errorf("package in %s has no doc comment", dir)
		}
	}
}
