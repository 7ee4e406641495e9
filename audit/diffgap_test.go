package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/event"
)

// lastDiff reads the fs.diff line of w's log (after Close) and its size.
func lastDiff(t *testing.T, w *Writer) (FSDiff, int) {
	t.Helper()
	data, err := os.ReadFile(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		var rec Record
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Type != event.FSDiff {
			continue
		}
		var d FSDiff
		if err := rec.DecodeBody(&d); err != nil {
			t.Fatal(err)
		}
		return d, len(line)
	}
	t.Fatal("no fs.diff line")
	return FSDiff{}, 0
}

func TestRecordDiffLineBounded(t *testing.T) {
	w, _ := newWriter(t, Options{})
	cmd, _ := w.StartCmd(CmdStart{Argv: []string{"true"}})
	res := &fsdiff.Result{}
	for i := range 200_000 {
		res.Changes = append(res.Changes, fsdiff.Change{Op: fsdiff.Added, Path: fmt.Sprintf("dir/file-%06d", i)})
		if i < 5000 {
			res.Problems = append(res.Problems, fmt.Sprintf("p%d: permission denied", i))
		}
	}
	if err := w.RecordDiff(cmd, res, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(RunEnd{}); err != nil {
		t.Fatal(err)
	}
	d, size := lastDiff(t, w)
	if size > 512<<10 {
		t.Errorf("fs.diff line is %d bytes; want it bounded (at most 512 KiB)", size)
	}
	if d.Files != 200_000 || d.Gap == nil || len(d.Changes)+d.Gap.ChangesOmitted != 200_000 ||
		len(d.Changes) > DefaultMaxItemized {
		t.Fatalf("files %d, %d itemized, gap %+v; want 200000 in all, at most %d itemized, the rest counted",
			d.Files, len(d.Changes), d.Gap, DefaultMaxItemized)
	}
	if len(d.Problems)+d.Gap.ProblemsOmitted != 5000 || len(d.Problems) > DefaultMaxItemized/10 {
		t.Errorf("%d problems itemized, %d omitted; want 5000 in all, at most %d itemized",
			len(d.Problems), d.Gap.ProblemsOmitted, DefaultMaxItemized/10)
	}
	if rep, err := Verify(w.Path()); err != nil || rep.DiffGaps != 1 {
		t.Errorf("Verify: %v, %d gaps; want intact with the gap counted", err, rep.DiffGaps)
	}
}

func TestRecordDiffPatchStoredPerRun(t *testing.T) {
	w, _ := newWriter(t, Options{MaxInlinePatch: 1024, MaxPatchStored: 10 << 10})
	patch := []byte(strings.Repeat("+a line of the patch\n", 300)) // 6,300 bytes
	var names []string
	for range 3 {
		cmd, _ := w.StartCmd(CmdStart{Argv: []string{"true"}})
		if err := w.RecordDiff(cmd, &fsdiff.Result{Patch: patch}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(RunEnd{}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(w.Dir())
	stored := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".patch") {
			names = append(names, e.Name())
			fi, _ := e.Info()
			stored += int(fi.Size())
		}
	}
	if stored > 10<<10 || len(names) != 1 {
		t.Errorf("stored %d bytes in %v; want one patch file, at most 10 KiB in all", stored, names)
	}
	rep, err := Verify(w.Path())
	if err != nil || rep.DiffGaps != 2 {
		t.Errorf("Verify: %v, %d gaps; want intact, two diffs with their patch not stored", err, rep.DiffGaps)
	}
}
