package seatbelt

import (
	"flag"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
