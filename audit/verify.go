package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/cordonhq/cordon/internal/event"
)

// Report is the outcome of Verify.
type Report struct {
	Path   string
	Run    string // run id of the first line
	Lines  int    // lines found intact, from the first
	Sealed bool   // the log ends with run.end
	// Head is the hash of the last intact line. Compared with a value recorded elsewhere
	// when the run ended (Writer.Head), it also detects a log rewritten from the first
	// line on with recomputed hashes, which no self-contained check can.
	Head    string
	Problem *VerifyError // the first problem; nil when the log is intact and sealed
	// DiffGaps counts the intact fs.diff lines with a gap: a diff a limits.diff bound
	// stopped, which is not the whole change (`cordon audit show` says what is missing).
	DiffGaps int
}

// OK reports whether the log is intact and sealed.
func (r Report) OK() bool { return r.Problem == nil }

var patchFileName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^fsdiff-[0-9]{4,}\.patch$`) })

// hashSuffixLen is the length of `,"hash":"` + 64 hex digits + `"}`.
const hashSuffixLen = len(`,"hash":"`) + hashHexLen + len(`"}`)

// Verify checks the log at path line by line and reports the first problem: a line that
// was edited (its hash does not match; or a patch file does not match its digest), lines
// missing or reordered (a seq gap or a prev that does not chain), a truncated log (a
// partial last line, or no run.end seal), or a line that is not in canonical form. The
// error is the Report's Problem (a *VerifyError, matching ErrEdited, ErrMissing,
// ErrReordered, ErrTruncated, ErrMalformed or ErrUnsupportedVersion through errors.Is),
// or an I/O error.
//
// The log is read a line at a time, in passes over its bytes as they were when it was
// opened (a live log grows behind them): a log can be far larger than the memory a
// server verifying many of them should spend.
func Verify(path string) (Report, error) {
	rep := Report{Path: path}
	f, err := os.Open(path)
	if err != nil {
		return rep, fmt.Errorf("verifying: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return rep, fmt.Errorf("verifying: %w", err)
	}
	p, err := verifyLog(&rep, func() io.Reader { return io.NewSectionReader(f, 0, fi.Size()) }, filepath.Dir(path))
	if err != nil {
		return rep, fmt.Errorf("verifying: %w", err)
	}
	if p != nil {
		rep.Problem = p
		return rep, p
	}
	return rep, nil
}

func verifyLines(rep *Report, data []byte, dir string) *VerifyError {
	p, _ := verifyLog(rep, func() io.Reader { return bytes.NewReader(data) }, dir) // no I/O to fail
	return p
}

// rawLines calls fn with each line of r, its newline kept (a last line may have none),
// and its 1-based number, until fn returns errStop (read.go; nil then) or another error.
func rawLines(r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if ferr := fn(n, line); ferr != nil {
				if errors.Is(ferr, errStop) {
					return nil
				}
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// verifyLog verifies the log open reads (anew at each call) and returns its first
// problem, or an error reading it.
func verifyLog(rep *Report, open func() io.Reader, dir string) (*VerifyError, error) {
	seqs := map[int64]bool{} // seqs present anywhere, to tell gaps from moves
	lines := 0
	err := rawLines(open(), func(_ int, l []byte) error {
		lines++
		if r, err := parseRecord(bytes.TrimSuffix(l, []byte("\n"))); err == nil {
			seqs[r.Seq] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if lines == 0 {
		return &VerifyError{1, ErrTruncated, "empty log: no run.start"}, nil
	}
	var p *VerifyError
	err = rawLines(open(), func(n int, l []byte) error {
		if l[len(l)-1] != '\n' {
			p = &VerifyError{n, ErrTruncated, fmt.Sprintf("partial last line (%d bytes, no newline)", len(l))}
			return errStop
		}
		rec, q := checkLine(n, l[:len(l)-1])
		if q == nil {
			q = checkPlace(rep, n, rec, seqs)
		}
		if q == nil && rec.Type == event.FSDiff {
			q = checkPatchFile(n, rec, dir, rep)
		}
		if q != nil {
			p = q
			return errStop
		}
		rep.Lines, rep.Head = n, rec.Hash
		rep.Sealed = rep.Sealed || rec.Type == event.RunEnd
		return nil
	})
	switch {
	case p != nil:
		return p, nil
	case err != nil:
		return nil, err
	case !rep.Sealed:
		return &VerifyError{lines + 1, ErrTruncated, "no run.end seal: the run did not finish, or its last lines were cut off"}, nil
	}
	return checkStageTail(open, dir)
}

// checkStageTail checks what follows the seal of a staged run (run.end says staged):
// either a line that leaves nothing staged (stage.discard, or stage.apply with
// nothing pending) ends the log, or the stage still waits in the run's directory.
// A log cut back after its seal, with the stage gone, is found truncated: lines
// after run.end are optional, so nothing else would tell.
func checkStageTail(open func() io.Reader, dir string) (*VerifyError, error) {
	var staged, closed bool
	lines := 0
	err := rawLines(open(), func(n int, l []byte) error {
		lines = n
		rec, err := parseRecord(bytes.TrimSuffix(l, []byte("\n")))
		if err != nil {
			return errStop // checked before
		}
		switch rec.Type {
		case event.RunEnd:
			var end event.RunEndBody
			staged = rec.DecodeBody(&end) == nil && end.Staged
		case event.StageDiscard:
			closed = true
		case event.StageApply:
			var b event.StageBody
			closed = rec.DecodeBody(&b) == nil && b.Pending == 0
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !staged || closed {
		return nil, nil
	}
	if _, err := os.Lstat(filepath.Join(dir, StageDir)); err == nil {
		return nil, nil
	}
	return &VerifyError{lines + 1, ErrTruncated, "the run's changes were staged, and no stage is left, but no stage.apply or stage.discard line says what became of them: lines after the seal were cut off"}, nil
}

// AfterSeal reports whether lines of type t follow run.end: what a person did with
// a staged run's changes once it had ended (stage.apply, stage.discard), chained to
// the seal like every other line.
func AfterSeal(t event.Type) bool { return t == event.StageApply || t == event.StageDiscard }

// checkLine checks one line on its own: hash, syntax, version and canonical form.
func checkLine(n int, line []byte) (Record, *VerifyError) {
	if len(line) < hashSuffixLen || !bytes.HasPrefix(line[len(line)-hashSuffixLen:], []byte(`,"hash":"`)) ||
		!bytes.HasSuffix(line, []byte(`"}`)) {
		return Record{}, &VerifyError{n, ErrMalformed, "line does not end with a hash field"}
	}
	hexSum := line[len(line)-2-hashHexLen : len(line)-2]
	canon := append(append([]byte{}, line[:len(line)-2-hashHexLen]...), `"}`...)
	sum := sha256.Sum256(canon)
	if !bytes.Equal(hexSum, []byte(hex.EncodeToString(sum[:]))) {
		return Record{}, &VerifyError{n, ErrEdited, "hash does not match the line's content"}
	}
	rec, err := parseRecord(line)
	if err != nil {
		kind := ErrMalformed
		if errors.Is(err, ErrUnsupportedVersion) {
			kind = ErrUnsupportedVersion
		}
		return Record{}, &VerifyError{n, kind, err.Error()}
	}
	if !bytes.Equal(encodeLine(rec), append(line, '\n')) {
		return Record{}, &VerifyError{n, ErrMalformed, "line is not in canonical form"}
	}
	return rec, nil
}

// checkPlace checks a line against the lines before it: sequence, chain, run id, seal.
func checkPlace(rep *Report, n int, rec Record, seqs map[int64]bool) *VerifyError {
	want := int64(n)
	switch {
	case rec.Seq < want || rec.Seq > want && seqs[want]:
		return &VerifyError{n, ErrReordered, fmt.Sprintf("seq %d where %d was expected", rec.Seq, want)}
	case rec.Seq > want:
		return &VerifyError{n, ErrMissing, fmt.Sprintf("seq %d follows %d: %d line(s) missing", rec.Seq, want-1, rec.Seq-want)}
	case rec.Prev != rep.Head:
		return &VerifyError{n, ErrReordered, "prev does not match the hash of the line before: lines were removed, inserted or replaced"}
	case n == 1 && rec.Type != event.RunStart:
		return &VerifyError{n, ErrMalformed, "first line is not run.start"}
	case n > 1 && rec.Run != rep.Run:
		return &VerifyError{n, ErrMalformed, fmt.Sprintf("line of run %q in the log of run %q", rec.Run, rep.Run)}
	case rep.Sealed && !AfterSeal(rec.Type):
		return &VerifyError{n, ErrMalformed, "line after the run.end seal"}
	case !rep.Sealed && AfterSeal(rec.Type):
		return &VerifyError{n, ErrMalformed, string(rec.Type) + " before the run.end seal"}
	case n > 1 && (rec.Type == event.RunStart):
		return &VerifyError{n, ErrMalformed, "second run.start"}
	}
	if n == 1 {
		rep.Run = rec.Run
	}
	return nil
}

// checkPatchFile checks that the patch file an fs.diff line names is there, unchanged,
// and counts the line in rep.DiffGaps when it records a gap.
func checkPatchFile(n int, rec Record, dir string, rep *Report) *VerifyError {
	var d FSDiff
	if err := rec.DecodeBody(&d); err != nil {
		return &VerifyError{n, ErrMalformed, fmt.Sprintf("fs.diff body: %v", err)}
	}
	if d.Gap != nil {
		rep.DiffGaps++
	}
	if d.PatchFile == "" {
		return nil
	}
	if !patchFileName().MatchString(d.PatchFile) {
		return &VerifyError{n, ErrMalformed, fmt.Sprintf("bad patch file name %q", d.PatchFile)}
	}
	data, err := os.ReadFile(filepath.Join(dir, d.PatchFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &VerifyError{n, ErrMissing, fmt.Sprintf("patch file %s is missing", d.PatchFile)}
	case err != nil:
		return &VerifyError{n, ErrMalformed, fmt.Sprintf("patch file: %v", err)}
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != d.PatchSHA256 {
		return &VerifyError{n, ErrEdited, fmt.Sprintf("patch file %s does not match its digest", d.PatchFile)}
	}
	return nil
}
