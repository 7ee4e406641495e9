package sandboxinit

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/server/workspace"
)

// TestServePacks: `podws serve` answers each request with a whole pack of the
// directory as it is then, framed, on one stream, and refuses anything but a pack
// request.
func TestServePacks(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	lim := workspace.Limits{Bytes: 1 << 20, Entries: 100}
	names := func(r io.Reader) []string {
		t.Helper()
		var got bytes.Buffer
		if ok, err := workspace.ReadFramed(r, &got); err != nil || !ok {
			t.Fatalf("a pack: %v %v", err, ok)
		}
		var ns []string
		tr := tar.NewReader(&got)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return ns
			}
			if err != nil {
				t.Fatalf("the pack is not a whole archive: %v", err)
			}
			ns = append(ns, h.Name)
		}
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- servePacks(inR, outW, dir, lim); outW.Close() }()
	inW.Write([]byte{'p'})
	if got := strings.Join(names(outR), " "); !strings.Contains(got, "a.txt") {
		t.Fatalf("first pack: %s", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inW.Write([]byte{'p'})
	if got := strings.Join(names(outR), " "); !strings.Contains(got, "b.txt") {
		t.Fatalf("second pack, after a file was made: %s", got)
	}
	inW.Write([]byte{'x'})
	if err := <-done; err == nil || !strings.Contains(err.Error(), "want 'p'") {
		t.Fatalf("a request that is not a pack: %v", err)
	}
	inW.Close()
}
