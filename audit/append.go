package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// StageDir is the directory a staged run keeps beside its log: the change set waiting
// for `cordon apply` or `cordon discard` (package runner owns what is in it). A run
// that has one is never pruned.
const StageDir = "stage"

// Append adds one line of type typ (one that follows the seal: [AfterSeal]) to the
// sealed log of the run in dir, chained to its last line. The log must verify first:
// a log that does not is never extended (its problem is returned). The caller
// serialises Appends to one log (a staged run's lock).
func Append(dir string, typ event.Type, body any) error {
	if !AfterSeal(typ) {
		return fmt.Errorf("appending %s: only %s and %s follow a run's seal", typ, event.StageApply, event.StageDiscard)
	}
	path := filepath.Join(dir, EventsFile)
	rep, err := Verify(path)
	if err != nil {
		return fmt.Errorf("appending to %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("appending to %s: %w", path, err)
	}
	w := &Writer{run: rep.Run, dir: dir, opts: Options{now: time.Now}, red: NewRedactor(), f: f, failed: make(chan struct{}), startSynced: closedChan(),
		seq: int64(rep.Lines), prev: rep.Head}
	raw, err := json.Marshal(body)
	if err == nil {
		_, err = w.appendLocked(typ, "", time.Time{}, raw)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("appending to %s: %w", path, err)
	}
	return nil
}
