package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// PruneFile is the file in the audit root where [Prune] records every run it removes:
// the removed run's own log is gone, so this is what is left of it.
const PruneFile = "prune.jsonl"

// PruneOptions says which runs [Prune] removes. A run goes only when every rule given
// allows it; a zero field is a rule not given, and at least one must be.
type PruneOptions struct {
	// OlderThan, when positive: runs whose run.end is older than this.
	OlderThan time.Duration
	// Keep, when positive: runs beyond the Keep newest of their workspace (each
	// workspace keeps its own Keep; runs of every state count, sealed or not).
	Keep int
	// DryRun reports what would go and removes nothing (and records nothing).
	DryRun bool

	now func() time.Time // nil means time.Now; tests set it
}

// Validate reports whether o gives at least one rule and no negative one.
func (o PruneOptions) Validate() error {
	var errs []error
	if o.OlderThan < 0 {
		errs = append(errs, errors.New("older-than is negative"))
	}
	if o.Keep < 0 {
		errs = append(errs, errors.New("keep is negative"))
	}
	if o.OlderThan <= 0 && o.Keep <= 0 {
		errs = append(errs, errors.New("no rule: give older-than or keep"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrBadPrune, err)
	}
	return nil
}

// Pruned is one line of [PruneFile]: a run Prune removed. Its fields are versioned
// with the log's schema ("v").
type Pruned struct {
	V         int       `json:"v"`         // [Version]
	TS        time.Time `json:"ts"`        // when the run was removed
	Run       string    `json:"run"`       // the run id
	Workspace string    `json:"workspace"` // from its run.start ("" in older logs)
	Started   time.Time `json:"started"`   // ts of its run.start
	Ended     time.Time `json:"ended"`     // ts of its run.end
	Lines     int       `json:"lines"`     // lines of the verified log
	// Head is the hash of the log's last line, as Verify found it: compared with a copy
	// kept elsewhere, it says the copy is of the log that was removed.
	Head string `json:"head"`
	Rule string `json:"rule"` // which rules removed it: "older-than 720h0m0s", "keep 10"
}

// PruneResult is what [Prune] did.
type PruneResult struct {
	Removed []Pruned  // the runs removed (or, with DryRun, that would be), newest first
	Kept    []Skipped // runs the rules named that were kept because they are not sealed and intact
}

// Skipped is a run Prune left alone, and why.
type Skipped struct {
	Run string
	Why string
}

// Prune removes the runs under root that the rules of o name, and only those that are
// sealed (their last line is run.end) and verify intact: a live run, a crashed one and
// a tampered one are kept, whatever their age, and listed in Kept. Each removal is
// first appended to root/[PruneFile] (and synced), then the run directory is removed,
// so no run disappears unrecorded. Files in root that are not run directories are never
// touched.
func Prune(root string, o PruneOptions) (PruneResult, error) {
	if err := o.Validate(); err != nil {
		return PruneResult{}, err
	}
	if o.now == nil {
		o.now = time.Now
	}
	runs, err := List(root)
	if err != nil {
		return PruneResult{}, err
	}
	var res PruneResult
	for _, s := range pruneCandidates(runs, o) {
		p, why := prunable(root, s)
		if why != "" {
			res.Kept = append(res.Kept, Skipped{Run: s.ID, Why: why})
			continue
		}
		p.Rule = o.rule()
		if !o.DryRun {
			p.TS = o.now().UTC()
			if err := removeRun(root, p); err != nil {
				return res, err
			}
		}
		res.Removed = append(res.Removed, p)
	}
	return res, nil
}

// pruneCandidates returns the runs (newest first, as List gives them) that the rules
// of o name, before any check of their state.
func pruneCandidates(runs []Summary, o PruneOptions) []Summary {
	rank := map[string]int{} // runs seen so far per workspace
	var out []Summary
	for _, s := range runs {
		ws := filepath.Clean(s.Workspace)
		n := rank[ws]
		rank[ws] = n + 1
		if o.Keep > 0 && n < o.Keep {
			continue
		}
		if o.OlderThan > 0 && o.now().Sub(s.finished()) <= o.OlderThan {
			continue
		}
		out = append(out, s)
	}
	return out
}

// finished is when the run ended, or for an unsealed run when it started (so that an
// old crashed run is named, and kept, rather than passed over in silence).
func (s Summary) finished() time.Time {
	if s.Sealed {
		return s.Ended
	}
	return s.Start
}

// prunable verifies a candidate: a Pruned describing it, or why it must stay.
func prunable(root string, s Summary) (Pruned, string) {
	switch {
	case s.Err != nil:
		return Pruned{}, "unreadable: " + s.Err.Error()
	case !s.Sealed:
		return Pruned{}, "unsealed (still running, or cordon died): never pruned"
	}
	rep, err := Verify(filepath.Join(root, s.ID, EventsFile))
	if !rep.OK() || err != nil {
		return Pruned{}, fmt.Sprintf("does not verify (%v): never pruned", err)
	}
	if _, err := os.Lstat(filepath.Join(root, s.ID, StageDir)); err == nil {
		return Pruned{}, "its staged changes wait for cordon apply or discard: never pruned"
	}
	return Pruned{V: Version, Run: s.ID, Workspace: s.Workspace, Started: s.Start, Ended: s.Ended,
		Lines: rep.Lines, Head: rep.Head}, ""
}

func (o PruneOptions) rule() string {
	switch {
	case o.OlderThan > 0 && o.Keep > 0:
		return fmt.Sprintf("older-than %s, keep %d", o.OlderThan, o.Keep)
	case o.OlderThan > 0:
		return fmt.Sprintf("older-than %s", o.OlderThan)
	}
	return fmt.Sprintf("keep %d", o.Keep)
}

// removeRun records p in the prune file, then removes its run directory.
func removeRun(root string, p Pruned) error {
	if err := ValidateRunID(p.Run); err != nil {
		return err
	}
	line, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("pruning %s: %w", p.Run, err)
	}
	f, err := os.OpenFile(filepath.Join(root, PruneFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("pruning %s: recording it: %w", p.Run, err)
	}
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pruning %s: recording it: %w", p.Run, err)
	}
	if err := linux.RemoveTree(filepath.Join(root, p.Run)); err != nil {
		return fmt.Errorf("pruning %s: %w", p.Run, err)
	}
	return nil
}

// ParseAge parses a prune age: a Go duration ("72h") or a whole number of days ("30d").
func ParseAge(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("%q: want a number of days such as 30d", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration such as 72h or 30d", s)
	}
	return d, nil
}
