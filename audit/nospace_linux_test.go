package audit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestRecordDiffNoRoomForThePatchFile: on a file system with no inode left (a served
// tenant's disk its sandbox filled), a patch too long for the line is a gap, not a
// failed log: the line keeps its head, says no_space, and the run closes intact.
func TestRecordDiffNoRoomForThePatchFile(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if err := linux.MountTmpfsWith(dir, "size=4m,nr_inodes=64,mode=0700"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = linux.Unmount(dir) })
	opts := Options{MaxInlinePatch: 64, Start: testStart(), now: fakeClock()}
	w, err := Create(dir, testRun, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprint("fill", i)))
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil || i > 100 {
			t.Fatalf("filling the inodes: %v after %d files", err, i)
		}
		f.Close()
	}
	cmd, err := w.StartCmd(CmdStart{Argv: []string{"touch", "many"}})
	if err != nil {
		t.Fatal(err)
	}
	patch := []byte(strings.Repeat("+a line of the patch\n", 20))
	if err := w.RecordDiff(cmd, &fsdiff.Result{Patch: patch}, nil); err != nil {
		t.Fatalf("RecordDiff with no inode left: %v; want a gap", err)
	}
	if err := w.Close(RunEnd{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(w.Path())
	if err != nil || !strings.Contains(string(data), `"no_space":true`) {
		t.Fatalf("the log: %v\n%s; want the diff's gap to say no_space", err, data)
	}
	if rep, err := Verify(w.Path()); err != nil || rep.DiffGaps != 1 {
		t.Errorf("Verify: %v, %d gaps; want intact with the gap counted", err, rep.DiffGaps)
	}
}
