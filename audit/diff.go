package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/event"
)

// RecordDiff writes the fs.diff line of command cmd (the id StartCmd returned) from the
// result of [fsdiff.Tracker.Diff]. The patch is redacted first; a patch longer than
// Options.MaxInlinePatch is written whole to a file next to the log (mode 0600, named
// fsdiff-NNNN.patch, its SHA-256 recorded in the line) and cut at a line boundary in the
// line. A failure fails the writer.
func (w *Writer) RecordDiff(cmd string, res *fsdiff.Result, quarantined []string) error {
	return w.recordDiff(cmd, res, func(b *FSDiff) { b.Quarantined = quarantined })
}

// RecordDiffBetween logs a session's workspace changes made outside any command's
// diff (see [FSDiff.Between]); during are the commands running meanwhile, if any.
func (w *Writer) RecordDiffBetween(res *fsdiff.Result, during, quarantined []string) error {
	return w.recordDiff("", res, func(b *FSDiff) { b.Between, b.During, b.Quarantined = true, during, quarantined })
}

func (w *Writer) recordDiff(cmd string, res *fsdiff.Result, mark func(*FSDiff)) error {
	if res == nil {
		err := fmt.Errorf("%w: fs.diff without a result", ErrBadEvent)
		w.fail(err)
		return err
	}
	patch := w.red.RedactBytes(res.Patch)
	body := FSDiff{
		Files:      len(res.Changes),
		Insertions: res.Insertions,
		Deletions:  res.Deletions,
		Changes:    make([]FileChange, len(res.Changes)),
		PatchBytes: len(patch),
		Scan: ScanInfo{
			Files:      res.Scan.Files,
			Read:       res.Scan.Read,
			DurationMS: res.Scan.Duration.Milliseconds(),
		},
		Problems: res.Problems,
	}
	for i, c := range res.Changes {
		body.Changes[i] = fileChange(c)
	}
	if len(patch) <= w.opts.MaxInlinePatch {
		body.Patch = string(patch)
	} else {
		name, err := w.writePatch(patch)
		if err != nil {
			w.fail(err)
			return err
		}
		sum := sha256.Sum256(patch)
		body.PatchFile, body.PatchSHA256, body.PatchTruncated = name, hex.EncodeToString(sum[:]), true
		body.Patch = string(cutAtLine(patch, w.opts.MaxInlinePatch))
	}
	if mark != nil {
		mark(&body)
	}
	_, err := w.Record(event.Event{Type: event.FSDiff, Cmd: cmd, Body: body})
	return err
}

func fileChange(c fsdiff.Change) FileChange {
	fc := FileChange{
		Op: c.Op.String(), Path: c.Path, OldPath: c.OldPath, Kind: c.Kind.String(),
		OldSize: c.OldSize, NewSize: c.NewSize, OldSHA256: c.OldSHA256, NewSHA256: c.NewSHA256,
		Added: c.Added, Deleted: c.Deleted,
	}
	if c.OldMode != 0 {
		fc.OldMode = fmt.Sprintf("%06o", c.OldMode)
	}
	if c.NewMode != 0 {
		fc.NewMode = fmt.Sprintf("%06o", c.NewMode)
	}
	if !c.OldMtime.IsZero() {
		fc.OldMtime, fc.NewMtime = c.OldMtime.UTC().Format(time.RFC3339Nano), c.NewMtime.UTC().Format(time.RFC3339Nano)
	}
	for _, x := range c.Xattrs {
		fc.Xattrs = append(fc.Xattrs, event.XattrChange{Op: x.Op.String(), Name: x.Name,
			OldSize: x.OldSize, NewSize: x.NewSize, OldSHA256: x.OldSHA256, NewSHA256: x.NewSHA256})
	}
	return fc
}

// writePatch stores a whole patch next to the log and returns its file name.
func (w *Writer) writePatch(patch []byte) (string, error) {
	name := fmt.Sprintf("fsdiff-%04d.patch", w.patchN.Add(1))
	f, err := os.OpenFile(filepath.Join(w.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("writing patch file: %w", err)
	}
	_, err = f.Write(patch)
	if err == nil && w.opts.Sync != SyncClose {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("writing patch file %s: %w", name, err)
	}
	return name, nil
}

// cutAtLine returns the longest prefix of b of at most n bytes that ends with a newline
// (or the first n bytes when the first line is longer).
func cutAtLine(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	if i := bytes.LastIndexByte(b[:n], '\n'); i >= 0 {
		return b[:i+1]
	}
	return b[:n]
}
