package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func all(string) bool { return true }

// packed is dir packed, for comparing trees.
func packed(t *testing.T, dir string) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, _, err := Pack(&b, dir, testLimits); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Syncing a workspace with the pack of a changed copy makes it that copy: changed
// files (a same-size change included) replaced, new ones made, missing ones removed,
// and unchanged ones left with their times.
func TestSyncReproducesChanges(t *testing.T) {
	host, _ := sandbox(t)
	pod := t.TempDir()
	base := map[string]string{"same.txt": "unchanged", "edit.txt": "aaaa", "gone/x": "1", "dir/keep": "k", "big": strings.Repeat("z", 100<<10)}
	write(t, host, base)
	write(t, pod, base)
	old := time.Unix(1_000_000, 0)
	for _, rel := range []string{"same.txt", "big", "edit.txt"} {
		if err := os.Chtimes(filepath.Join(host, rel), old, old); err != nil {
			t.Fatal(err)
		}
	}
	// The pod's command: a same-size edit, a change past the first chunk, a new
	// file, a link, a removed directory, a file turned into a directory.
	write(t, pod, map[string]string{"edit.txt": "bbbb", "new/n.txt": "new", "big": strings.Repeat("z", 90<<10) + "y" + strings.Repeat("z", 10<<10-1)})
	must(t, os.RemoveAll(filepath.Join(pod, "gone")))
	must(t, os.Symlink("same.txt", filepath.Join(pod, "link")))
	must(t, os.Remove(filepath.Join(pod, "dir/keep")))
	must(t, os.Mkdir(filepath.Join(pod, "dir/keep"), 0o700))

	st, err := Sync(bytes.NewReader(packed(t, pod)), host, testLimits, all)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(packed(t, host), packed(t, pod)) {
		t.Error("the workspace differs from the pod's after the sync")
	}
	if st.Refused != 0 || st.Changed != 6 || st.Removed != 3 {
		t.Errorf("stats %+v; want 6 changed (edit.txt, big, new, new/n.txt, link, dir/keep), 3 removed (gone/x, gone, dir/keep)", st)
	}
	fi, err := os.Stat(filepath.Join(host, "same.txt"))
	if err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("same.txt was rewritten (mtime %v, %v)", fi.ModTime(), err)
	}
	for _, rel := range []string{"edit.txt", "big"} {
		if fi, err := os.Stat(filepath.Join(host, rel)); err != nil || fi.ModTime().Equal(old) {
			t.Errorf("%s was not rewritten (%v)", rel, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Paths writable refuses are never made, changed or removed: they are counted.
func TestSyncKeepsWhatWritableRefuses(t *testing.T) {
	host, _ := sandbox(t)
	write(t, host, map[string]string{".git/HEAD": "ref: main", ".git/config": "c", "a.txt": "a"})
	writable := func(rel string) bool { return rel != ".git" && !strings.HasPrefix(rel, ".git/") }
	data := archive(t,
		entry{name: ".git/", typ: tar.TypeDir, mode: 0o755},
		entry{name: ".git/HEAD", typ: tar.TypeReg, data: "ref: evil"},
		entry{name: ".git/hooks/", typ: tar.TypeDir, mode: 0o755},
		entry{name: ".git/hooks/pre-commit", typ: tar.TypeReg, data: "#!/bin/sh\n", mode: 0o755},
		entry{name: "b.txt", typ: tar.TypeReg, data: "b"},
	)
	st, err := Sync(bytes.NewReader(data), host, testLimits, writable)
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{".git/HEAD": "ref: main", ".git/config": "c", "b.txt": "b"} {
		if got, err := os.ReadFile(filepath.Join(host, rel)); err != nil || string(got) != want {
			t.Errorf("%s: %q, %v; want %q", rel, got, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(host, ".git/hooks")); err == nil {
		t.Error(".git/hooks was made")
	}
	if _, err := os.Lstat(filepath.Join(host, "a.txt")); err == nil {
		t.Error("a.txt, writable and not in the archive, was kept")
	}
	want := []string{".git/HEAD", ".git/hooks", ".git/hooks/pre-commit", ".git/config"}
	if st.Refused != len(want) || !slices.Equal(st.RefusedPaths, want) {
		t.Errorf("refused %d %q; want %q", st.Refused, st.RefusedPaths, want)
	}
}

// A hostile archive's entries are refused, one by one, without an error: nothing is
// made outside, through a link, or as a special file.
func TestSyncRefusesHostileEntries(t *testing.T) {
	host, outside := sandbox(t)
	must(t, os.Symlink("../outside", filepath.Join(host, "hostlink")))
	data := archive(t,
		entry{name: "../evil", typ: tar.TypeReg, data: "x"},
		entry{name: "/tmp/evil", typ: tar.TypeReg, data: "x"},
		entry{name: "up", typ: tar.TypeSymlink, link: "../outside"},
		entry{name: "abs", typ: tar.TypeSymlink, link: "/etc/shadow"},
		entry{name: "l", typ: tar.TypeSymlink, link: "sub"},
		entry{name: "sub/", typ: tar.TypeDir, mode: 0o755},
		entry{name: "l/through", typ: tar.TypeReg, data: "x"},
		entry{name: "hostlink", typ: tar.TypeSymlink, link: "../outside"},
		entry{name: "hostlink/secret", typ: tar.TypeReg, data: "OWNED"},
		entry{name: "hard", typ: tar.TypeLink, link: "../outside/secret"},
		entry{name: "hard2", typ: tar.TypeLink, link: "sub"},
		entry{name: "fifo", typ: tar.TypeFifo},
		entry{name: "dev", typ: tar.TypeChar},
		entry{name: "suid", typ: tar.TypeReg, data: "x", mode: 0o4755},
		entry{name: "ok", typ: tar.TypeReg, data: "fine"},
	)
	st, err := Sync(bytes.NewReader(data), host, testLimits, all)
	if err != nil {
		t.Fatal(err)
	}
	assertOutsideUntouched(t, outside)
	names, _ := os.ReadDir(host)
	var got []string
	for _, n := range names {
		got = append(got, n.Name())
	}
	// hostlink is the host's own link to outside: the archive's entry for the same
	// link is refused (it leaves), so the host's is kept, counted, never followed.
	if want := []string{"hostlink", "l", "ok", "sub"}; !slices.Equal(got, want) {
		t.Errorf("the workspace holds %q; want %q", got, want)
	}
	if st.Refused != 12 {
		t.Errorf("refused %d (%q); want 12", st.Refused, st.RefusedPaths)
	}
}

// An archive past the limits is an error, and then nothing is removed.
func TestSyncBounded(t *testing.T) {
	host, _ := sandbox(t)
	write(t, host, map[string]string{"precious": "p"})
	var es []entry
	for i := range 200 {
		es = append(es, entry{name: "f" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i), typ: tar.TypeReg, data: "x"})
	}
	_, err := Sync(bytes.NewReader(archive(t, es...)), host, testLimits, all)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("200 entries past a limit of 100: %v", err)
	}
	_, err = Sync(bytes.NewReader(archive(t, entry{name: "big", typ: tar.TypeReg, data: strings.Repeat("b", 2<<20)})), host, testLimits, all)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("2 MiB past a limit of 1 MiB: %v", err)
	}
	data := archive(t, entry{name: "f", typ: tar.TypeReg, data: strings.Repeat("x", 2000)})
	_, err = Sync(bytes.NewReader(data[:1000]), host, testLimits, all)
	if err == nil {
		t.Fatal("a truncated archive was synced")
	}
	if _, err := os.Stat(filepath.Join(host, "precious")); err != nil {
		t.Errorf("a failed sync removed a file: %v", err)
	}
}

// FuzzSync syncs arbitrary bytes into a workspace holding a protected .git beside a
// directory it must never touch: nothing outside changes, nothing writable refuses
// changes, nothing special or leaving is made, and every failure is an EntryError or
// the file system's.
func FuzzSync(f *testing.F) {
	for _, seed := range [][]entry{
		{{name: "a/b", typ: tar.TypeReg, data: "x"}, {name: "l", typ: tar.TypeSymlink, link: "a"}, {name: "l/c", typ: tar.TypeReg}},
		{{name: ".git/HEAD", typ: tar.TypeReg, data: "evil"}, {name: "../x", typ: tar.TypeReg}},
		{{name: "h", typ: tar.TypeLink, link: "../outside/secret"}, {name: "keep", typ: tar.TypeDir}},
		{{name: ".git", typ: tar.TypeSymlink, link: "a"}, {name: "p", typ: tar.TypeFifo}},
		{{name: "a/l", typ: tar.TypeSymlink, link: ".."}, {name: "e", typ: tar.TypeSymlink, link: "a/l/../outside"}},
	} {
		f.Add(archive(f, seed...))
	}
	// Archives of changes (removals) and sparse entries, as PackChanges writes them.
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	_ = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{recordPack: "changes"}})
	for _, n := range []string{".git", "a", "l/x"} {
		_ = tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, PAXRecords: map[string]string{recordRemoved: "1"}, Format: tar.FormatPAX})
	}
	body := "0 2\nab100 3\ncde"
	_ = tw.WriteHeader(&tar.Header{Name: "s", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)),
		PAXRecords: map[string]string{recordSparse: "2048"}, Format: tar.FormatPAX})
	_, _ = tw.Write([]byte(body))
	_ = tw.Close()
	f.Add(b.Bytes())
	lim := Limits{Bytes: 4096, Entries: 32}
	writable := func(rel string) bool { return rel != ".git" && !strings.HasPrefix(rel, ".git/") }
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, outside := sandbox(t)
		write(t, ws, map[string]string{".git/HEAD": "ref: main", "a/keep": "k"})
		got, err := SyncFrom(bytes.NewReader(data), ws, lim, writable, true)
		st := got.Stats
		var ee *EntryError
		if err != nil && !errors.As(err, &ee) && !strings.HasPrefix(err.Error(), "unpacking ") {
			t.Fatalf("Sync: %v (neither an EntryError nor the file system's)", err)
		}
		if st.Entries > lim.Entries || st.Bytes > lim.Bytes {
			t.Fatalf("stats %+v past %+v", st, lim)
		}
		assertOutsideUntouched(t, outside)
		if got, err := os.ReadFile(filepath.Join(ws, ".git/HEAD")); err != nil || string(got) != "ref: main" {
			t.Errorf(".git/HEAD: %q, %v", got, err)
		}
		if names, _ := os.ReadDir(filepath.Join(ws, ".git")); len(names) != 1 {
			t.Errorf(".git holds %v", names)
		}
		err = filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			m := fi.Mode()
			switch {
			case m&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0:
				t.Errorf("%s: mode %v", p, m)
			case m.IsRegular(), m.IsDir():
			case m&os.ModeSymlink != 0:
				target, _ := os.Readlink(p)
				rel, _ := filepath.Rel(ws, p)
				if !linkStaysInside(filepath.ToSlash(rel), target) {
					t.Errorf("%s: a link to %q", p, target)
				}
			default:
				t.Errorf("%s: a special file (%v)", p, m)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// PackOnly leaves out what keep refuses, with everything below it.
func TestPackOnly(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{".env": "S=1", "secret/k": "k", "src/a": "a", "src/.env": "nested"})
	var b bytes.Buffer
	keep := func(rel string) bool { return rel != ".env" && rel != "secret" }
	if _, _, err := PackOnly(&b, dir, testLimits, keep); err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(&b)
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, hdr.Name)
	}
	if want := []string{"src/", "src/.env", "src/a"}; !slices.Equal(names, want) {
		t.Errorf("packed %q; want %q", names, want)
	}
}

// UnpackAsCaller writes a file inPlace names into the existing inode (a bind mount of
// it shows the new content), and makes nothing of its own owner's.
func TestUnpackAsCallerInPlace(t *testing.T) {
	ws, _ := sandbox(t)
	write(t, ws, map[string]string{"cordon.yaml": ""})
	held, err := os.Open(filepath.Join(ws, "cordon.yaml")) // the inode a mount would bind
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	data := archive(t, entry{name: "cordon.yaml", typ: tar.TypeReg, data: "version: 1\n", mode: 0o644},
		entry{name: "other", typ: tar.TypeReg, data: "o"})
	inPlace := func(rel string) bool { return rel == "cordon.yaml" }
	if _, err := UnpackAsCaller(bytes.NewReader(data), ws, testLimits, inPlace); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(held)
	if err != nil || string(got) != "version: 1\n" {
		t.Errorf("the held inode reads %q, %v; want the archive's content", got, err)
	}
	// A link where a pinned file should be is not written through.
	ws2, outside := sandbox(t)
	must(t, os.Symlink("../outside/secret", filepath.Join(ws2, "cordon.yaml")))
	_, err = UnpackAsCaller(bytes.NewReader(data), ws2, testLimits, inPlace)
	if err == nil {
		t.Error("a fill wrote a pinned file through a link")
	}
	assertOutsideUntouched(t, outside)
}

// Refused entries count against the limits too: a hostile archive of many refused
// entries, or a refused entry with a huge body, ends with ErrTooLarge.
func TestSyncBoundsRefused(t *testing.T) {
	host, _ := sandbox(t)
	var es []entry
	for range 200 {
		es = append(es, entry{name: "../x", typ: tar.TypeReg, data: "x"})
	}
	if _, err := Sync(bytes.NewReader(archive(t, es...)), host, testLimits, all); !errors.Is(err, ErrTooLarge) {
		t.Errorf("200 refused entries past a limit of 100: %v", err)
	}
	data := archive(t, entry{name: "suid", typ: tar.TypeReg, data: strings.Repeat("s", 2<<20), mode: 0o4755})
	if _, err := Sync(bytes.NewReader(data), host, testLimits, all); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a refused entry of 2 MiB past a limit of 1 MiB: %v", err)
	}
}
