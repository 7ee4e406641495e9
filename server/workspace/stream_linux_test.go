package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// streamed is one round of a pack stream: pod packed against base, the archive
// synced into host. It returns the new stamps and the archive's size.
func streamed(t *testing.T, pod, host string, base Stamps, writable func(string) bool) (Stamps, Synced, int) {
	t.Helper()
	var b bytes.Buffer
	_, _, next, err := PackChanges(&b, pod, testLimits, base)
	if err != nil {
		t.Fatal(err)
	}
	got, err := SyncFrom(bytes.NewReader(b.Bytes()), host, testLimits, writable, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Changes != (base != nil) {
		t.Fatalf("a changes archive: %v; want %v", got.Changes, base != nil)
	}
	return next, got, b.Len()
}

// past waits out the racy window, so that what was written before is trusted by its
// stamp at the next pack.
func past() { time.Sleep(2 * racyWindow) }

// A pack stream brings back every kind of change, one round after another, and each
// round's archive holds the changes only: the host ends each round equal to the Pod.
func TestPackChangesReproducesChanges(t *testing.T) {
	pod, host := t.TempDir(), t.TempDir()
	big := strings.Repeat("x", 512<<10)
	write(t, pod, map[string]string{"big.bin": big, "a.txt": "a", "d/b.txt": "b", "d/e/c.txt": "c", "gone/x/y.txt": "y", "f2d": "file"})
	must(t, os.Symlink("a.txt", filepath.Join(pod, "link")))
	past() // else the whole pack's stamps are racy, and the next sends everything again
	base, _, whole := streamed(t, pod, host, nil, all)
	if !bytes.Equal(packed(t, host), packed(t, pod)) {
		t.Fatal("the whole pack did not make the host the Pod's copy")
	}
	if whole < len(big) {
		t.Fatalf("the whole pack is %d bytes, less than its big file", whole)
	}
	rounds := []struct {
		name   string
		change func()
	}{
		{"nothing", func() {}},
		{"a same-size edit", func() { write(t, pod, map[string]string{"a.txt": "A"}) }},
		{"new files and a removed tree", func() {
			write(t, pod, map[string]string{"new/n.txt": "n", "d/e/c2.txt": "c2"})
			must(t, os.RemoveAll(filepath.Join(pod, "gone")))
		}},
		{"a file made a directory, a directory made a file", func() {
			must(t, os.Remove(filepath.Join(pod, "f2d")))
			write(t, pod, map[string]string{"f2d/inside.txt": "i"})
			must(t, os.RemoveAll(filepath.Join(pod, "d/e")))
			write(t, pod, map[string]string{"d/e": "now a file"})
		}},
		{"a chmod and a link moved", func() {
			must(t, os.Chmod(filepath.Join(pod, "a.txt"), 0o600))
			must(t, os.Remove(filepath.Join(pod, "link")))
			must(t, os.Symlink("d/b.txt", filepath.Join(pod, "link")))
		}},
		{"an edit that puts the times back", func() {
			fi, err := os.Stat(filepath.Join(pod, "d/b.txt"))
			must(t, err)
			write(t, pod, map[string]string{"d/b.txt": "B"})
			must(t, os.Chtimes(filepath.Join(pod, "d/b.txt"), fi.ModTime(), fi.ModTime()))
		}},
	}
	for _, r := range rounds {
		past()
		r.change()
		var got Synced
		var size int
		base, got, size = streamed(t, pod, host, base, all)
		if !bytes.Equal(packed(t, host), packed(t, pod)) {
			t.Fatalf("%s: the host is not the Pod's copy after the changes (removed %q, names %v)", r.name, got.Removed, got.Names)
		}
		if size >= len(big) {
			t.Errorf("%s: the changes archive is %d bytes: the unchanged big file was sent again", r.name, size)
		}
	}
}

// A change made within the racy window of a pack is sent again by the next one, even
// when it keeps the size and every time: a stamp taken then is never trusted.
func TestPackChangesRacyResent(t *testing.T) {
	pod, host := t.TempDir(), t.TempDir()
	write(t, pod, map[string]string{"r.txt": "1"})
	base, _, _ := streamed(t, pod, host, nil, all) // r.txt was written just now: racy
	if base["r.txt"] != 0 {
		t.Fatal("a file written within the racy window was stamped as settled")
	}
	fi, err := os.Stat(filepath.Join(pod, "r.txt"))
	must(t, err)
	write(t, pod, map[string]string{"r.txt": "2"})
	must(t, os.Chtimes(filepath.Join(pod, "r.txt"), fi.ModTime(), fi.ModTime()))
	_, got, _ := streamed(t, pod, host, base, all)
	if _, ok := got.Names["r.txt"]; !ok {
		t.Fatal("the racy file was not sent again")
	}
	if b, _ := os.ReadFile(filepath.Join(host, "r.txt")); string(b) != "2" {
		t.Fatalf("host has %q; want %q", b, "2")
	}
}

// A removal the host may not make (writable refuses it) is kept and counted; one
// through a link of the host's touches nothing outside.
func TestSyncChangesRemovalsChecked(t *testing.T) {
	host, outside := sandbox(t)
	write(t, host, map[string]string{"keep/k.txt": "k", "free.txt": "f"})
	must(t, os.Symlink(outside, filepath.Join(host, "out")))
	rec := map[string]string{recordRemoved: "1"}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{recordPack: "changes"}}))
	for _, n := range []string{"keep", "free.txt", "out/secret", "missing"} {
		must(t, tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, PAXRecords: rec, Format: tar.FormatPAX}))
	}
	must(t, tw.Close())
	writable := func(rel string) bool { return rel != "keep" && !strings.HasPrefix(rel, "keep/") }
	got, err := SyncFrom(bytes.NewReader(b.Bytes()), host, testLimits, writable, true)
	must(t, err)
	if _, err := os.Stat(filepath.Join(host, "keep/k.txt")); err != nil {
		t.Error("a removal writable refuses was made")
	}
	if _, err := os.Stat(filepath.Join(host, "free.txt")); err == nil {
		t.Error("a writable removal was not made")
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Error("a removal went through the host's link")
	}
	if got.Refused == 0 {
		t.Error("the refused removal was not counted")
	}
	// The same archive where the whole tree was asked for is an error; a removal
	// entry in a whole archive is refused, not made.
	if _, err := SyncFrom(bytes.NewReader(b.Bytes()), host, testLimits, all, false); !errors.Is(err, ErrMalformed) {
		t.Errorf("a changes archive taken for a whole one: %v", err)
	}
	write(t, host, map[string]string{"z.txt": "z"})
	var w bytes.Buffer
	tw = tar.NewWriter(&w)
	must(t, tw.WriteHeader(&tar.Header{Name: "z.txt", Typeflag: tar.TypeReg, PAXRecords: rec, Format: tar.FormatPAX}))
	must(t, tw.Close())
	got, err = SyncFrom(bytes.NewReader(w.Bytes()), host, testLimits, all, false)
	must(t, err)
	if _, err := os.Stat(filepath.Join(host, "z.txt")); err != nil || got.Refused != 1 {
		t.Errorf("a removal entry in a whole archive: %v, refused %d; want it refused and kept", err, got.Refused)
	}
}

// blocks is the 512-byte blocks a file takes on disk.
func blocks(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	must(t, err)
	return fi.Sys().(*syscall.Stat_t).Blocks
}

// A sparse file costs neither side its holes: its pack holds its data, the host's
// copy keeps the holes, and a pack of the same file again changes nothing.
func TestPackChangesSparse(t *testing.T) {
	pod, host := t.TempDir(), t.TempDir()
	const size = 1 << 30
	p := filepath.Join(pod, "sparse.img")
	f, err := os.Create(p)
	must(t, err)
	must(t, f.Truncate(size))
	_, err = f.WriteAt([]byte("head"), 0)
	must(t, err)
	_, err = f.WriteAt([]byte("middle"), size/2)
	must(t, err)
	must(t, f.Close())
	testutil.Require(t, blocks(t, p) <= 1024, "the test directory's file system keeps holes")
	lim := Limits{Bytes: 2 << 30, Entries: 10}
	for round := range 2 {
		var b bytes.Buffer
		if _, _, _, err := PackChanges(&b, pod, lim, nil); err != nil {
			t.Fatal(err)
		}
		if b.Len() > 64<<10 {
			t.Fatalf("round %d: the pack of a sparse file with 10 bytes of data is %d bytes", round, b.Len())
		}
		got, err := SyncFrom(bytes.NewReader(b.Bytes()), host, lim, all, true)
		must(t, err)
		if want := 1 - round; got.Changed != want {
			t.Errorf("round %d: changed %d; want %d", round, got.Changed, want)
		}
		if got.Bytes < size {
			t.Errorf("round %d: counted %d bytes; a sparse file counts its whole size", round, got.Bytes)
		}
	}
	hp := filepath.Join(host, "sparse.img")
	fi, err := os.Stat(hp)
	must(t, err)
	if fi.Size() != size || blocks(t, hp) > 1024 {
		t.Fatalf("host copy: %d bytes in %d blocks; want %d bytes, holes kept", fi.Size(), blocks(t, hp), size)
	}
	hf, err := os.Open(hp)
	must(t, err)
	defer hf.Close()
	for off, want := range map[int64]string{0: "head", size / 2: "middle", size/2 - 3: "\x00\x00\x00m", size - 4: "\x00\x00\x00\x00"} {
		buf := make([]byte, len(want))
		if _, err := hf.ReadAt(buf, off); err != nil || string(buf) != want {
			t.Errorf("at %d: %q, %v; want %q", off, buf, err, want)
		}
	}
	// A sparse file of the same size but other data replaces the host's.
	must(t, os.WriteFile(filepath.Join(pod, "sparse.img"), nil, 0o644))
	g, err := os.OpenFile(p, os.O_WRONLY, 0)
	must(t, err)
	must(t, g.Truncate(size))
	_, err = g.WriteAt([]byte("other"), size-5)
	must(t, err)
	must(t, g.Close())
	var b bytes.Buffer
	_, _, _, err = PackChanges(&b, pod, lim, nil)
	must(t, err)
	got, err := SyncFrom(bytes.NewReader(b.Bytes()), host, lim, all, true)
	must(t, err)
	buf := make([]byte, 5)
	hf2, err := os.Open(hp)
	must(t, err)
	defer hf2.Close()
	_, err = hf2.ReadAt(buf, size-5)
	if got.Changed != 1 || err != nil || string(buf) != "other" {
		t.Errorf("a changed sparse file: changed %d, %q, %v", got.Changed, buf, err)
	}
	if _, err := hf2.ReadAt(buf[:4], 0); err != nil || string(buf[:4]) != "\x00\x00\x00\x00" {
		t.Errorf("the old data stayed: %q", buf[:4])
	}
}

// A sparse entry's extents are hostile: out of order, overlapping, past the size,
// malformed or cut short, each ends the sync as malformed and leaves the host's file
// as it was; a size past the bound is too large.
func TestSyncSparseHostile(t *testing.T) {
	for name, c := range map[string]struct {
		size string
		body string
		want error
	}{
		"out of order":  {"100", "50 2\nab10 2\ncd", ErrMalformed},
		"overlapping":   {"100", "10 5\nabcde12 2\ncd", ErrMalformed},
		"past the size": {"100", "99 2\nab", ErrMalformed},
		"empty extent":  {"100", "10 0\n", ErrMalformed},
		"negative":      {"100", "-1 2\nab", ErrMalformed},
		"no newline":    {"100", "10 2", ErrMalformed},
		"a long line":   {"100", strings.Repeat("1", 200) + " 2\nab", ErrMalformed},
		"cut short":     {"100", "10 5\nab", ErrMalformed},
		"bad size":      {"-5", "", ErrMalformed},
		"too large":     {"1099511627776", "", ErrTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			host, _ := sandbox(t)
			write(t, host, map[string]string{"s": "kept"})
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			body := c.body
			must(t, tw.WriteHeader(&tar.Header{Name: "s", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)),
				PAXRecords: map[string]string{recordSparse: c.size}, Format: tar.FormatPAX}))
			_, err := tw.Write([]byte(body))
			must(t, err)
			must(t, tw.Close())
			_, err = SyncFrom(bytes.NewReader(b.Bytes()), host, testLimits, all, false)
			if !errors.Is(err, c.want) {
				t.Errorf("got %v; want %v", err, c.want)
			}
			if got, _ := os.ReadFile(filepath.Join(host, "s")); string(got) != "kept" {
				t.Errorf("the host's file is %q", got)
			}
			names, _ := os.ReadDir(host)
			for _, n := range names {
				if strings.HasPrefix(n.Name(), ".cordon-apply") {
					t.Errorf("a temporary file was left: %s", n.Name())
				}
			}
		})
	}
}

// Past MaxStamps a pack keeps no stamps (the next is whole), and a pack of changes
// that crosses it is still right.
func TestPackChangesPastMaxStamps(t *testing.T) {
	defer func(n int) { MaxStamps = n }(MaxStamps)
	MaxStamps = 8
	pod, host := t.TempDir(), t.TempDir()
	write(t, pod, map[string]string{"a": "a", "b": "b", "gone": "g"})
	past()
	base, _, _ := streamed(t, pod, host, nil, all)
	if len(base) != 3 {
		t.Fatalf("stamps %v", base)
	}
	files := map[string]string{}
	for i := range 12 {
		files[filepath.Join("many", string(rune('a'+i)))] = "m"
	}
	write(t, pod, files)
	must(t, os.Remove(filepath.Join(pod, "gone")))
	next, got, _ := streamed(t, pod, host, base, all)
	if next != nil {
		t.Errorf("past the bound the pack kept %d stamps", len(next))
	}
	if !got.Changes || !bytes.Equal(packed(t, host), packed(t, pod)) {
		t.Errorf("the changes pack crossing the bound did not make the host the Pod's copy (removed %q)", got.Removed)
	}
}

// A directory the Pod replaced by a link out of the workspace: the link is refused,
// and what the host has below the directory stays (its removal is not made either),
// as in a whole sync.
func TestSyncChangesRefusedReplacementKeepsBelow(t *testing.T) {
	pod, host := t.TempDir(), t.TempDir()
	write(t, pod, map[string]string{"sub/keep.txt": "kept"})
	past()
	base, _, _ := streamed(t, pod, host, nil, all)
	must(t, os.RemoveAll(filepath.Join(pod, "sub")))
	must(t, os.Symlink("/etc", filepath.Join(pod, "sub")))
	_, got, _ := streamed(t, pod, host, base, all)
	if b, err := os.ReadFile(filepath.Join(host, "sub/keep.txt")); err != nil || string(b) != "kept" {
		t.Errorf("below the refused link: %q, %v (removed %q)", b, err, got.Removed)
	}
}

// A stamp is racy within racyWindow of its pack's start, and within coarseWindow when
// its file system keeps whole seconds only.
func TestStampRacyWindow(t *testing.T) {
	start := time.Now().Truncate(time.Second).Add(500 * time.Millisecond)
	recent := start.Add(-racyWindow).UnixNano()
	for _, c := range []struct {
		name  string
		ctime time.Time
		racy  bool
	}{
		{"fine, just before the window", start.Add(-racyWindow - time.Millisecond), false},
		{"fine, in the window", start.Add(-racyWindow / 2), true},
		{"whole seconds, a second before", start.Add(-500 * time.Millisecond), true},
		{"whole seconds, three seconds before", start.Add(-2500 * time.Millisecond), false},
	} {
		st := linux.Stat{Ino: 7, Size: 1, Mtime: c.ctime.UnixNano(), Ctime: c.ctime.UnixNano(), Mode: 0o100644}
		if got := stampOf(st, recent) == 0; got != c.racy {
			t.Errorf("%s: racy %v; want %v", c.name, got, c.racy)
		}
	}
}
