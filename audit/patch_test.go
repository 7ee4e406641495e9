package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit/fsdiff"
)

// TestWritePatch: the run's patches in order, a long one whole from its file, one
// past the storage bound counted incomplete, and an edited patch file refused.
func TestWritePatch(t *testing.T) {
	w, root := newWriter(t, Options{MaxInlinePatch: 64, MaxPatchStored: 300})
	small := "--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+one\n"
	long := "--- a/y\n+++ b/y\n@@ -0,0 +1,20 @@\n" + strings.Repeat("+a line of the long patch\n", 10)
	tooLong := strings.Repeat("+past the storage bound\n", 20)
	for _, p := range []string{small, long, tooLong} {
		cmd, _ := w.StartCmd(CmdStart{Argv: []string{"true"}})
		if err := w.RecordDiff(cmd, &fsdiff.Result{Patch: []byte(p)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(RunEnd{}); err != nil {
		t.Fatal(err)
	}
	run, err := Open(root, testRun)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ReadEvents(run.EventsPath())
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	incomplete, err := WritePatch(&b, run, recs)
	if err != nil {
		t.Fatal(err)
	}
	got := b.String()
	if !strings.HasPrefix(got, small+long) || incomplete != 1 || got == small+long+tooLong {
		t.Errorf("patch %q, %d incomplete; want the small and the long whole, the third cut and counted", got, incomplete)
	}
	files, _ := filepath.Glob(filepath.Join(run.Dir, "fsdiff-*.patch"))
	if len(files) != 1 {
		t.Fatalf("patch files %v; want one", files)
	}
	if err := os.WriteFile(files[0], []byte("edited"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if _, err := WritePatch(&b, run, recs); !errors.Is(err, ErrEdited) || b.Len() != len(small) {
		t.Errorf("an edited patch file: %v, %d bytes written; want ErrEdited after the first patch only", err, b.Len())
	}
}
