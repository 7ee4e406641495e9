package seatbelt

import (
	"os"
	"path/filepath"
	"testing"
)

// Linux only (by file name): the golden profiles hold a Linux host's @system paths.

// goldenRoot is an empty directory two levels under /tmp, as t.TempDir makes it but
// whatever $TMPDIR says: the profile lists the directories above the fixture.
func goldenRoot(t *testing.T) string {
	t.Helper()
	parent, err := os.MkdirTemp("/tmp", "seatbelt-golden-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	root := filepath.Join(parent, "001")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	return root
}

// TestGolden compares the profile of each example contract with testdata/NAME.sb, the
// fixture's temporary root shown as $ROOT (plain and in the case-folded regexes). The
// plans are compiled for the fixture's described host (systemRoot: Debian with merged
// /usr), not for the machine running the test, and the fixture sits under /tmp whatever
// $TMPDIR says, so the files are the same on every Linux machine; the attacks, not these
// files, are what must hold everywhere.
func TestGolden(t *testing.T) {
	for name, yaml := range examples(t) {
		t.Run(name, func(t *testing.T) {
			f := newFixtureAt(t, goldenRoot(t))
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
