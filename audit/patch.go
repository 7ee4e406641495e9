package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/cordonhq/cordon/internal/event"
)

// WritePatch writes the workspace changes the run's fs.diff lines recorded (recs, its
// records) to w as one unified diff, in the log's order: each line's patch whole,
// from the patch file next to the log when the line holds only its start (checked
// against the digest the line records before a byte of it is written). It recomputes
// nothing. incomplete counts the patches the log kept only the start of (past
// Options.MaxPatchStored): what is written of them is that start.
func WritePatch(w io.Writer, run Run, recs []Record) (incomplete int, err error) {
	for _, rec := range recs {
		if rec.Type != event.FSDiff {
			continue
		}
		var d FSDiff
		if err := rec.DecodeBody(&d); err != nil {
			return incomplete, fmt.Errorf("line %d: fs.diff body: %w", rec.Seq, err)
		}
		switch {
		case d.PatchFile != "":
			if err := copyPatchFile(w, run.Dir, d); err != nil {
				return incomplete, fmt.Errorf("line %d: %w", rec.Seq, err)
			}
			continue
		case d.PatchTruncated:
			incomplete++
		}
		if _, err := io.WriteString(w, d.Patch); err != nil {
			return incomplete, err
		}
	}
	return incomplete, nil
}

// copyPatchFile copies the patch file d names, in dir, to w once its digest matches.
func copyPatchFile(w io.Writer, dir string, d FSDiff) error {
	if !patchFileName().MatchString(d.PatchFile) {
		return fmt.Errorf("%w: bad patch file name %q", ErrMalformed, d.PatchFile)
	}
	f, err := os.Open(filepath.Join(dir, d.PatchFile))
	if err != nil {
		return fmt.Errorf("patch file: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("patch file %s: %w", d.PatchFile, err)
	}
	if hex.EncodeToString(h.Sum(nil)) != d.PatchSHA256 {
		return fmt.Errorf("%w: patch file %s does not match its digest", ErrEdited, d.PatchFile)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err = io.Copy(w, f)
	return err
}
