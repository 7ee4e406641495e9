package workspace

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// wchar is the bytes this process has passed to write calls so far (/proc/self/io).
func wchar(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no wchar in /proc/self/io")
	return 0
}

// Red team (sparse files): a sparse entry is written into a new file as it is read and
// compared with the host's only then, so a host file that is the same is written out
// again (its data, to a temporary file then dropped) at every sync that sends it: a
// `touch` of a sparse file in the Pod, or every whole sync (the first, the last, all
// of them past 100,000 paths) for every sparse file, costs the host its data in disk
// writes, and that much free space, where a dense file the same is only read.
func TestRedTeamSyncSparseSameRewritten(t *testing.T) {
	pod, host := t.TempDir(), t.TempDir()
	data := bytes.Repeat([]byte("d"), 8<<20)
	for _, dir := range []string{pod, host} {
		f, err := os.Create(filepath.Join(dir, "sparse.img"))
		must(t, err)
		_, err = f.WriteAt(data, 1<<20)
		must(t, err)
		must(t, f.Truncate(16<<20))
		must(t, f.Close())
	}
	lim := Limits{Bytes: 64 << 20, Entries: 100}
	var b bytes.Buffer
	if _, _, _, err := PackChanges(&b, pod, lim, nil); err != nil {
		t.Fatal(err)
	}
	before := wchar(t)
	got, err := SyncFrom(bytes.NewReader(b.Bytes()), host, lim, all, false)
	if err != nil {
		t.Fatal(err)
	}
	written := wchar(t) - before
	if got.Changed != 0 || written > 1<<20 {
		t.Errorf("a sparse file the host has the same: changed %d, %d bytes written on the host for its 8 MiB of data", got.Changed, written)
	}
}

// The fix's other side: where the host's file and the Pod's differ (in an extent's
// data, in a hole of the Pod's that the host has data in, past the last extent, in
// the last chunk), the host's file becomes the Pod's, byte for byte, and its holes
// past the point they differ stay holes.
func TestRedTeamSyncSparseDiffersAnywhere(t *testing.T) {
	const size = 4 << 20
	chunk := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	type write struct {
		off  int64
		data []byte
	}
	base := []write{{64 << 10, chunk('a', 100<<10)}, {1 << 20, chunk('b', 64<<10)}, {3 << 20, chunk('c', 8<<10)}}
	for _, tc := range []struct {
		name      string
		pod, host []write
	}{
		{"in an extent's data", append(base[:2:2], write{3 << 20, chunk('C', 8<<10)}), base},
		{"one byte late in a chunk", base, append(base[:2:2], write{3 << 20, append(chunk('c', 8<<10-1), 'x')})},
		{"the host has data in a hole", base, append(base[:3:3], write{2 << 20, chunk('h', 4<<10)})},
		{"the host has data past the last extent", base, append(base[:3:3], write{size - 4096, chunk('t', 4096)})},
		{"the Pod has data where the host has a hole", append(base[:3:3], write{2 << 20, chunk('p', 4<<10)}), base},
		{"the first extent", append([]write{{64 << 10, chunk('A', 100<<10)}}, base[1:]...), base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod, host := t.TempDir(), t.TempDir()
			for dir, ws := range map[string][]write{pod: tc.pod, host: tc.host} {
				f, err := os.Create(filepath.Join(dir, "s.img"))
				must(t, err)
				for _, w := range ws {
					_, err = f.WriteAt(w.data, w.off)
					must(t, err)
				}
				must(t, f.Truncate(size))
				must(t, f.Close())
			}
			var b bytes.Buffer
			lim := Limits{Bytes: 64 << 20, Entries: 100}
			if _, _, _, err := PackChanges(&b, pod, lim, nil); err != nil {
				t.Fatal(err)
			}
			got, err := SyncFrom(&b, host, lim, all, false)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := os.ReadFile(filepath.Join(pod, "s.img"))
			have, _ := os.ReadFile(filepath.Join(host, "s.img"))
			if got.Changed != 1 || !bytes.Equal(want, have) {
				t.Errorf("changed %d; the host's file is the Pod's: %v", got.Changed, bytes.Equal(want, have))
			}
			fi, err := os.Stat(filepath.Join(host, "s.img"))
			must(t, err)
			if used := fi.Sys().(*syscall.Stat_t).Blocks * 512; used > 1<<20 {
				t.Errorf("the host's file takes %d bytes of disk: its holes were written", used)
			}
		})
	}
}

// Red team (the sidecar's memory): MaxStamps bounds the stamps by count, but each
// keeps its path (up to MaxPath bytes), and a pack holds two sets (its base's and its
// own): 20,000 empty files below a 3.8 KB directory path cost the Pod nothing and
// the stamps 80 MB each, past the sidecar's 64 MiB (on the test cluster, filled from
// the host, the session's first sync broke: the sidecar died mid-pack). The stamps a
// pack keeps must be bounded by their bytes too.
func TestRedTeamSyncLongPathsStampBytes(t *testing.T) {
	pod := t.TempDir()
	deep := pod
	for i := range 15 {
		deep = filepath.Join(deep, strings.Repeat(strconv.Itoa(i%10), 250))
	}
	must(t, os.MkdirAll(deep, 0o755))
	for i := range 5000 {
		must(t, os.WriteFile(filepath.Join(deep, strconv.Itoa(i)), nil, 0o644))
	}
	var b bytes.Buffer
	_, _, stamps, err := PackChanges(&b, pod, Limits{Bytes: 1 << 20, Entries: 1 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	held := 0
	for rel := range stamps {
		held += len(rel)
	}
	if held > 16<<20 {
		t.Errorf("a pack of 5,000 empty files kept %d stamps holding %d bytes of paths", len(stamps), held)
	}
}

// Held (the archive hostile): a changes archive's sparse entries and removals aimed
// through the host's links (one to outside the workspace, one to a directory inside)
// and at the workspace's root change nothing outside it, nor through a link.
func TestRedTeamSyncChangesThroughLinks(t *testing.T) {
	ws, outside := sandbox(t)
	must(t, os.Symlink(outside, filepath.Join(ws, "out")))
	must(t, os.Mkdir(filepath.Join(ws, "in"), 0o755))
	must(t, os.WriteFile(filepath.Join(ws, "in", "keep"), []byte("k"), 0o644))
	must(t, os.Symlink("in", filepath.Join(ws, "inlink")))
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	must(t, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{recordPack: "changes"}, Format: tar.FormatPAX}))
	for _, name := range []string{"out/secret", "out/new", "inlink/keep", "inlink/new"} {
		body := "0 1\nX"
		must(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatPAX,
			PAXRecords: map[string]string{recordSparse: "6"}}))
		_, err := tw.Write([]byte(body))
		must(t, err)
	}
	for _, name := range []string{"out/secret", "inlink/keep", ".", "out/..", "../outside/secret", "in/../out/secret"} {
		must(t, tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Format: tar.FormatPAX, PAXRecords: map[string]string{recordRemoved: "1"}}))
	}
	must(t, tw.Close())
	if _, err := SyncFrom(&b, ws, testLimits, all, true); err != nil {
		t.Logf("sync: %v", err)
	}
	if s, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(s) != "SECRET" {
		t.Errorf("outside/secret: %q %v", s, err)
	}
	if _, err := os.Lstat(filepath.Join(outside, "new")); err == nil {
		t.Error("a file was made outside the workspace")
	}
	if k, err := os.ReadFile(filepath.Join(ws, "in", "keep")); err != nil || string(k) != "k" {
		t.Errorf("in/keep, through a link inside: %q %v", k, err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "in", "new")); err == nil {
		t.Error("a file was made through a link inside the workspace")
	}
	for _, p := range []string{"out", "inlink"} {
		if fi, err := os.Lstat(filepath.Join(ws, p)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s is no longer the host's link: %v", p, err)
		}
	}
}
