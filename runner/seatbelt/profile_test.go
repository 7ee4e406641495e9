package seatbelt

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden compares the profile of each example contract with testdata/NAME.sb, the
// fixture's temporary root shown as $ROOT (plain and in the case-folded regexes). The
// plans hold this host's @system entries, so the golden files are Linux's (recorded on
// Debian with merged /usr); the attacks, not these files, are what must hold everywhere.
func TestGolden(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the golden profiles hold a Linux host's @system paths")
	}
	for name, yaml := range examples(t) {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			prof, _ := f.profile(t, f.plan(t, yaml))
			got := f.tokenize(t, prof.SBPL)
			file := filepath.Join("testdata", name+".sb")
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if got != string(want) {
				t.Errorf("the profile of %s differs from %s (go test -update rewrites it):\n%s", name, file, firstDiff(got, string(want)))
			}
		})
	}
}

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
