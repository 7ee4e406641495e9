package linux

import (
	"errors"
	"fmt"
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
			held, err := MakePlaceholders(aside)
			must(err)
			defer held.Release()
			made := held.IDs
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
	made, err := MakePlaceholders([]Placeholder{{Path: filepath.Join(dir, "a", "b")}})
	made.Release()
	if ids := made.IDs; !errors.Is(err, unix.ENOENT) || len(ids) != 0 {
		t.Fatalf("ids %v, err %v; want ENOENT and nothing made", made.IDs, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the missing parent was made: %v", err)
	}
	made, err = MakePlaceholders([]Placeholder{{Path: filepath.Join(dir, "a"), Parent: true}, {Path: filepath.Join(dir, "a", "b")}})
	made.Release()
	if err != nil || len(made.IDs) != 2 {
		t.Fatalf("ids %v, err %v; want both made", made.IDs, err)
	}
}

// TestMadeIdentityNotByName: the identity MakePlaceholders returns is that of the
// entry it made, never of one put at its name before it looked: a file's is taken of
// the descriptor that created it; a directory replaced by one that holds something, or
// is another user's, fails it (ErrMadeReplaced) rather than be taken for the one made.
func TestMadeIdentityNotByName(t *testing.T) {
	t.Cleanup(func() { madeHook = nil })
	dir := t.TempDir()
	var made FileID
	// swap puts at name, in place of the entry made (its identity kept in made), the
	// entry plant makes at a temporary name.
	swap := func(plant func(string) error) func(int, string) {
		return func(pfd int, name string) {
			e, err := statAt(pfd, name)
			if err != nil {
				t.Fatal(err)
			}
			made = e.id
			tmp := filepath.Join(dir, "planted-"+name)
			if err := plant(tmp); err != nil {
				t.Fatal(err)
			}
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	madeHook = swap(func(p string) error { return os.WriteFile(p, nil, 0o600) })
	held, err := MakePlaceholders([]Placeholder{{Path: filepath.Join(dir, "file")}})
	held.Release()
	ids := held.IDs
	if err != nil || len(ids) != 1 || ids[0] != made {
		t.Errorf("a file swapped once made: ids %v, err %v; want the identity of the one made, %v", ids, err, made)
	}
	plants := map[string]func(string) error{
		"holding": func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(p, "planted"), []byte("echo pwned\n"), 0o644)
		},
		"another's": func(p string) error {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
			return os.Lchown(p, 65534, 65534)
		},
	}
	for name, plant := range plants {
		if name == "another's" && os.Geteuid() != 0 {
			continue // only root gives an entry away
		}
		madeHook = swap(plant)
		for _, parent := range []bool{false, true} {
			p := filepath.Join(dir, fmt.Sprintf("dir-%s-%v", name, parent))
			held, err := MakePlaceholders([]Placeholder{{Path: p, Dir: !parent, Parent: parent}})
			held.Release()
			if ids := held.IDs; !errors.Is(err, ErrMadeReplaced) || len(ids) != 0 {
				t.Errorf("a directory swapped once made for one %s (parent %v): ids %v, err %v; want ErrMadeReplaced", name, parent, ids, err)
			}
		}
	}
	madeHook = nil
	held, err = MakePlaceholders([]Placeholder{{Path: filepath.Join(dir, "plain"), Dir: true}})
	held.Release()
	if err != nil || len(held.IDs) != 1 {
		t.Fatalf("a directory made with no swap: ids %v, err %v", held.IDs, err)
	}
}

// TestMadeHeldNoReuse: while Made holds what it made, an entry removed from its name
// and made again there (by a writer of the directory) is never given its identity, as
// ext4 gives a freed inode number to the next entry made in the same tick of its birth
// clock; so a placement compared to the identity made tells the two apart.
func TestMadeHeldNoReuse(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []bool{true, false} {
		aside := Placeholder{Path: filepath.Join(dir, fmt.Sprintf(".aside-%v", d)), Dir: d}
		p := Placeholder{Path: filepath.Join(dir, fmt.Sprintf("placed-%v", d)), Dir: d}
		held, err := MakePlaceholders([]Placeholder{aside})
		if err != nil {
			t.Fatal(err)
		}
		// Removed and made again, ten times: a reused inode would come at once.
		for range 10 {
			if err := os.Remove(aside.Path); err != nil {
				t.Fatal(err)
			}
			if d {
				err = os.Mkdir(aside.Path, 0o700)
			} else {
				err = os.WriteFile(aside.Path, nil, 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			if id, err := Identify(aside.Path); err != nil || id == held.IDs[0] {
				t.Fatalf("dir %v: the entry made again has the identity %v (%v) of the one made, held", d, id, err)
			}
		}
		ids, errs := PlacePlaceholders([]Placeholder{aside}, []Placeholder{p})
		held.Release()
		if errs[0] != nil || ids[0].Ino == held.IDs[0].Ino {
			t.Errorf("dir %v: placed %v (%v); want another entry than the one made, %v", d, ids[0], errs[0], held.IDs[0])
		}
	}
}

// TestHoldNoReuse: the inode number of an entry Hold holds (a placeholder another
// run made, adopted) is never given to one made at its path once it is removed, as
// TestMadeHeldNoReuse says of those MakePlaceholders made; its identity is that of
// what was opened, and a link at its name is held as the link.
func TestHoldNoReuse(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []bool{true, false} {
		p := filepath.Join(dir, fmt.Sprintf("adopted-%v", d))
		mk := func() error {
			if d {
				return os.Mkdir(p, 0o700)
			}
			return os.WriteFile(p, nil, 0o600)
		}
		if err := mk(); err != nil {
			t.Fatal(err)
		}
		want, err := Identify(p)
		if err != nil {
			t.Fatal(err)
		}
		var held Made
		id, err := held.Hold(p)
		if err != nil || id != want {
			t.Fatalf("dir %v: held %v (%v); want %v", d, id, err, want)
		}
		for range 10 {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := mk(); err != nil {
				t.Fatal(err)
			}
			// Not even its inode number: where no birth time is kept, that is all
			// that tells a directory from another.
			if now, err := Identify(p); err != nil || now.Dev == id.Dev && now.Ino == id.Ino {
				t.Fatalf("dir %v: the entry made again has the inode number of the one held: %v (%v)", d, now, err)
			}
		}
		held.Release()
	}
	// A link at the name is held as the link, never followed.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	var held Made
	defer held.Release()
	id, err := held.Hold(link)
	target, _ := Identify(dir)
	if err == nil && id == target {
		t.Fatalf("Hold followed the link at its name: %v", id)
	}
}

// TestIdentifyEmpty: only an empty directory or an empty regular file is found empty,
// with the identity Identify gives; a fifo, a device or a link at the name is neither,
// and is never opened to be read, waited on (the fifo has no writer) or followed.
func TestIdentifyEmpty(t *testing.T) {
	dir := t.TempDir()
	at := func(n string) string { return filepath.Join(dir, n) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(at("empty-dir"), 0o700))
	must(os.Mkdir(at("full-dir"), 0o700))
	must(os.WriteFile(at("full-dir/x"), nil, 0o600))
	must(os.WriteFile(at("empty-file"), nil, 0o600))
	must(os.WriteFile(at("full-file"), []byte("x"), 0o600))
	must(unix.Mkfifo(at("fifo"), 0o600))
	must(os.Symlink(at("empty-dir"), at("link-to-empty")))
	if os.Geteuid() == 0 {
		must(unix.Mknod(at("null"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	}
	for name, want := range map[string]bool{
		"empty-dir": true, "empty-file": true, "full-dir": false, "full-file": false,
		"fifo": false, "link-to-empty": false, "null": false,
	} {
		if _, err := os.Lstat(at(name)); err != nil {
			continue // the device, when not root
		}
		id, empty, err := IdentifyEmpty(at(name))
		if err != nil || empty != want {
			t.Errorf("%s: empty %v, err %v; want %v", name, empty, err, want)
			continue
		}
		if byName, err := Identify(at(name)); err != nil || byName != id {
			t.Errorf("%s: identity %v; Identify gives %v (%v)", name, id, byName, err)
		}
	}
}
