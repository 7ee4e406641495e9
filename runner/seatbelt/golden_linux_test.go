package seatbelt

import (
	"os"
	"path/filepath"
	"testing"
)

// Linux only (by file name): the golden profiles hold a Linux host's @system paths.

// TestGolden compares the profile of each example contract with testdata/NAME.sb, the
// fixture's temporary root shown as $ROOT (plain and in the case-folded regexes). The
// plans hold this host's @system entries, so the golden files are Linux's (recorded on
// Debian with merged /usr); the attacks, not these files, are what must hold everywhere.
func TestGolden(t *testing.T) {
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
