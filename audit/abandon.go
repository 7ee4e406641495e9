package audit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// SealAbandoned seals the log of the run in dir whose cordon died before it could
// (killed, out of memory, the host rebooted): it appends the run.end line the dead
// process never wrote, chained to the last line, with end (Commands is counted from
// the log, Dropped is 0: what the dead process held was never written). It reports
// whether it sealed the log: false, with no error, for a log already sealed.
//
// The caller makes sure that no process writes the log any more (the run's cordon is
// gone) and serialises calls for one log. A log that does not verify up to its last
// line (a line edited, missing or cut in the middle by the crash) is never extended:
// its problem is returned and the log is left as it is, for `cordon audit verify` to
// report.
func SealAbandoned(dir string, end RunEnd) (bool, error) {
	path := filepath.Join(dir, EventsFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("sealing %s: %w", path, err)
	}
	rep := Report{Path: path}
	p := verifyLines(&rep, data, dir)
	switch {
	case p == nil || rep.Sealed:
		return false, nil // sealed already (a stage's tail is the stage's business)
	case !errors.Is(p, ErrTruncated) || !bytes.HasSuffix(data, []byte("\n")) || bytes.Count(data, []byte("\n")) != rep.Lines:
		// Only "every line intact, no seal" is sealed; a partial last line is
		// ErrTruncated too, and must stay for verify to report.
		return false, fmt.Errorf("sealing %s: the log does not verify, left as it is: %w", path, p)
	}
	end.Commands, end.Dropped = 0, 0
	for _, l := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		if rec, err := parseRecord(l); err == nil && rec.Type == event.CmdStart {
			end.Commands++
		}
	}
	w, err := reopen(dir, rep, int64(len(data)))
	if err != nil {
		return false, fmt.Errorf("sealing %s: %w", path, err)
	}
	body, err := w.encodeBody(event.Event{Type: event.RunEnd, Body: end})
	if err != nil {
		w.f.Close()
		return false, fmt.Errorf("sealing %s: %w", path, err)
	}
	if err := w.appendClose(event.RunEnd, body); err != nil {
		return false, fmt.Errorf("sealing %s: %w", path, err)
	}
	return true, nil
}

// reopen returns a writer that appends to the verified log of the run in dir, of size
// bytes, after the lines rep found intact: it writes with no other writer (the run's is
// gone) and is used for one line, by appendClose.
func reopen(dir string, rep Report, size int64) (*Writer, error) {
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, err
	}
	// size matters: a failed write truncates the log back to it, never further.
	return &Writer{run: rep.Run, dir: dir, opts: Options{Sync: SyncClose, now: time.Now}, red: NewRedactor(), f: f,
		failed: make(chan struct{}), startSynced: closedChan(), seq: int64(rep.Lines), prev: rep.Head, size: size}, nil
}

// appendClose writes one line of type typ chained to the last, fsyncs and closes
// the log.
func (w *Writer) appendClose(typ event.Type, body []byte) error {
	w.mu.Lock()
	_, err := w.appendLocked(typ, "", time.Time{}, body)
	w.mu.Unlock()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}
