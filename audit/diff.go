package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/linux"
)

// RecordDiff writes the fs.diff line of command cmd (the id StartCmd returned) from the
// result of [fsdiff.Tracker.Diff]. The patch is redacted first; a patch longer than
// Options.MaxInlinePatch is written whole to a file next to the log (mode 0600, named
// fsdiff-NNNN.patch, its SHA-256 recorded in the line) and cut at a line boundary in the
// line. A failure fails the writer, but for no room for the patch file (ENOSPC, EDQUOT),
// which is a gap in the line like a patch past Options.MaxPatchStored.
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
		PatchBytes: len(patch),
		Scan: ScanInfo{
			Files:      res.Scan.Files,
			Read:       res.Scan.Read,
			DurationMS: res.Scan.Duration.Milliseconds(),
			Watched:    res.Scan.Watched,
			Walked:     res.Scan.Walked,
			Unread:     res.Scan.Unread,
		},
	}
	gap := diffGap(res.Gap)
	body.Changes, gap.ChangesOmitted = itemize(res.Changes, w.opts.MaxItemized, fileChange)
	problems, omitted := itemize(res.Problems, max(1, w.opts.MaxItemized/10),
		func(p string) string { return p })
	if len(problems) > 0 {
		body.Problems, gap.ProblemsOmitted = problems, omitted
	}
	switch {
	case len(patch) <= w.opts.MaxInlinePatch:
		body.Patch = string(patch)
	case w.stored.Add(int64(len(patch))) > w.opts.MaxPatchStored:
		w.stored.Add(-int64(len(patch)))
		body.Patch, body.PatchTruncated = string(cutAtLine(patch, w.opts.MaxInlinePatch)), true
		gap.PatchNotStored = len(patch)
	default:
		name, err := w.writePatch(patch)
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			// No room for a new file (a tenant's disk its sandbox filled, every inode
			// used): the line keeps the patch's head and says the rest was not stored,
			// as past MaxPatchStored; the log itself goes on.
			w.stored.Add(-int64(len(patch)))
			body.Patch, body.PatchTruncated = string(cutAtLine(patch, w.opts.MaxInlinePatch)), true
			gap.PatchNotStored, gap.NoSpace = len(patch), true
			break
		}
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
	if n := max(1, w.opts.MaxItemized/10); len(body.Quarantined) > n {
		// Every one was renamed; the line names the first ones.
		body.Quarantined, gap.QuarantinedOmitted = body.Quarantined[:n], len(body.Quarantined)-n
	}
	if gap.Unlisted+gap.IncompleteDirs+gap.NotCompared+gap.NotHashed+gap.PatchOmitted+
		gap.PatchNotStored+gap.ChangesOmitted+gap.ProblemsOmitted+gap.QuarantinedOmitted > 0 || gap.TimedOut {
		body.Gap = gap
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

// writePatch stores a whole patch next to the log and returns its file name. The
// patch is the tenant's bytes (its files' lines), up to limits.diff.patch_run of them
// a run, so it is written WithoutReserve (internal/linux): never into the blocks a
// tenant's disk keeps for the log lines and the seal. A disk the sandbox filled makes
// it ENOSPC, which the caller records as a gap (no_space).
func (w *Writer) writePatch(patch []byte) (string, error) {
	name := fmt.Sprintf("fsdiff-%04d.patch", w.patchN.Add(1))
	p := filepath.Join(w.dir, name)
	var f *os.File
	err := linux.WithoutReserve(func() (err error) {
		f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = f.Write(patch)
		if err == nil && w.opts.Sync != SyncClose {
			err = f.Sync()
		}
		return err
	})
	if f == nil {
		return "", fmt.Errorf("writing patch file: %w", err)
	}
	if err == nil {
		// Made WithoutReserve, the file is not this process's user's: it is made so.
		err = f.Chown(os.Geteuid(), os.Getegid())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(p)
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

// itemBytes is how many bytes of paths an fs.diff line itemizes per item allowed, on
// average: a line of the most items holds at most that many times the count.
const itemBytes = 64

// itemize converts the first items of in, at most n of them and their text at most
// n*itemBytes bytes (the first one always), and counts the rest.
func itemize[T, U any](in []T, n int, conv func(T) U) (out []U, omitted int) {
	budget := n * itemBytes
	out = make([]U, 0, min(len(in), n))
	for i, x := range in {
		u := conv(x)
		budget -= itemSize(u)
		if i >= n || (i > 0 && budget < 0) {
			return out, len(in) - i
		}
		out = append(out, u)
	}
	return out, 0
}

func itemSize(x any) int {
	switch v := x.(type) {
	case FileChange:
		return len(v.Path) + len(v.OldPath)
	case string:
		return len(v)
	}
	return 0
}

// diffGap is the gap of an fs.diff line, from what fsdiff left out.
func diffGap(g fsdiff.Gap) *DiffGap {
	return &DiffGap{
		Unlisted:        g.Unlisted,
		IncompleteDirs:  g.Incomplete,
		IncompletePaths: g.IncompletePaths,
		NotCompared:     g.NotCompared,
		NotHashed:       g.NotHashed,
		NotHashedPaths:  g.NotHashedPaths,
		PatchOmitted:    g.PatchOmitted,
		TimedOut:        g.TimedOut,
	}
}
