package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

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
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("appending to %s: %w", path, err)
	}
	w, err := reopen(dir, rep, st.Size())
	if err != nil {
		return fmt.Errorf("appending to %s: %w", path, err)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		w.f.Close()
		return fmt.Errorf("appending to %s: %w", path, err)
	}
	if err := w.appendClose(typ, raw); err != nil {
		return fmt.Errorf("appending to %s: %w", path, err)
	}
	return nil
}
