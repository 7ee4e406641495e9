package workspace

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
