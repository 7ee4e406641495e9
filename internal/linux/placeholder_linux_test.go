package linux

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPlaceNeverReplaces: PlacePlaceholders gives an entry made aside its name and never
// replaces what is there, with RENAME_NOREPLACE and on a file system without it (NFS,
// some FUSE), where a file is linked and unlinked and a directory renamed after a look.
func TestPlaceNeverReplaces(t *testing.T) {
	for _, exclusive := range []bool{true, false} {
		name := "renameat2"
		if !exclusive {
			name = "fallback"
		}
		t.Run(name, func(t *testing.T) {
			if !exclusive {
				t.Cleanup(func() { renameat2 = unix.Renameat2 })
				renameat2 = func(int, string, int, string, uint) error { return unix.EINVAL }
			}
			dir := t.TempDir()
			at := func(n string) string { return filepath.Join(dir, n) }
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.WriteFile(at("taken-file"), []byte("the user's\n"), 0o644))
			must(os.Mkdir(at("taken-dir"), 0o755))
			must(os.WriteFile(at("taken-dir/keep"), []byte("the user's\n"), 0o644))
			must(os.Mkdir(at("taken-empty"), 0o755))
			ps := []Placeholder{
				{Path: at("free-file")}, {Path: at("free-dir"), Dir: true},
				{Path: at("taken-file")}, {Path: at("taken-dir"), Dir: true}, {Path: at("taken-empty"), Dir: true},
			}
			aside := make([]Placeholder, len(ps))
			for i, p := range ps {
				aside[i] = p
				aside[i].Path = at(".aside-" + filepath.Base(p.Path))
			}
			made, err := MakePlaceholders(aside)
			must(err)
			ids, errs := PlacePlaceholders(aside, ps)
			for i, p := range ps[:2] {
				if errs[i] != nil || ids[i].Ino != made[i].Ino {
					t.Errorf("%s: placed %v, err %v; want the entry made aside (%v)", filepath.Base(p.Path), ids[i], errs[i], made[i])
				}
				if _, err := os.Lstat(aside[i].Path); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: its aside name is still there (%v)", filepath.Base(p.Path), err)
				}
			}
			for i, p := range ps[2:] {
				i += 2
				if !errors.Is(errs[i], os.ErrExist) || ids[i] != (FileID{}) {
					t.Errorf("%s: placed %v, err %v; want it refused as existing", filepath.Base(p.Path), ids[i], errs[i])
				}
				if _, err := os.Lstat(aside[i].Path); err != nil {
					t.Errorf("%s: what was made aside is gone: %v", filepath.Base(p.Path), err)
				}
			}
			if b, err := os.ReadFile(at("taken-file")); err != nil || string(b) != "the user's\n" {
				t.Errorf("taken-file holds %q (%v)", b, err)
			}
			if b, err := os.ReadFile(at("taken-dir/keep")); err != nil || string(b) != "the user's\n" {
				t.Errorf("taken-dir/keep holds %q (%v)", b, err)
			}
		})
	}
}

// TestMakePlaceholdersMakesNoParent: a placeholder whose parent is missing fails with
// ENOENT and makes nothing; only a parent listed (Parent) is made, with its identity.
func TestMakePlaceholdersMakesNoParent(t *testing.T) {
	dir := t.TempDir()
	ids, err := MakePlaceholders([]Placeholder{{Path: filepath.Join(dir, "a", "b")}})
	if !errors.Is(err, unix.ENOENT) || len(ids) != 0 {
		t.Fatalf("ids %v, err %v; want ENOENT and nothing made", ids, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the missing parent was made: %v", err)
	}
	ids, err = MakePlaceholders([]Placeholder{{Path: filepath.Join(dir, "a"), Parent: true}, {Path: filepath.Join(dir, "a", "b")}})
	if err != nil || len(ids) != 2 {
		t.Fatalf("ids %v, err %v; want both made", ids, err)
	}
}
