package linux

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWriteFileLeavesHoles: a stream with runs of zeros (an archive's sparse entry,
// its holes read as zeros) lands with holes where the zeros were, its bytes and size
// as they were given, whether written anew or overwritten in place.
func TestWriteFileLeavesHoles(t *testing.T) {
	dir := t.TempDir()
	tr, err := OpenTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	const mib = 1 << 20
	want := append(append(make([]byte, 8*mib+5), "data"...), make([]byte, 8*mib+3)...)
	for _, tc := range []struct {
		name  string
		write func() error
	}{
		{"new", func() error { return tr.WriteFile("f", bytes.NewReader(want), 0o644, -1, -1) }},
		{"in place", func() error { return tr.Overwrite("f", io.MultiReader(bytes.NewReader(want)), 0o644) }},
	} {
		if err := tc.write(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "f"))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read back %d bytes, %v; want the %d written", tc.name, len(got), err, len(want))
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, "f"), &st); err != nil {
			t.Fatal(err)
		}
		if st.Blocks*512 > mib {
			t.Errorf("%s: %d bytes allocated for %d of data; want holes", tc.name, st.Blocks*512, len("data"))
		}
	}
}
