package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/runner/sandbox"
	"github.com/cordonhq/cordon/session/wire"
)

// GC removes what runs whose cordon process is gone left behind under root: their
// placeholders, cgroups and run directories, and dead sessions' socket and files. It
// returns the run ids it cleaned. (The host uids of dead runs are [GCUIDs]'.)
func GC(root string) ([]string, error) { return StartGC(root)() }

// StartGC is [GC] in two parts: it removes what dead runs left (their placeholders,
// run directories and cgroups) before it returns, and leaves the rest (dead sessions'
// files, gate sockets and idle cgroups whose run directory is gone) to a goroutine;
// wait returns when both are done, with what GC returns. A caller compiles a contract
// meanwhile: only the first part changes what a compile sees (a dead run's placeholder
// must not pass for a real path).
func StartGC(root string) (wait func() ([]string, error)) {
	if !filepath.IsAbs(root) {
		err := errdefs.Invalidf("the run root %q is not an absolute path ($%s)", root, paths.RunRootEnv)
		return func() ([]string, error) { return nil, err }
	}
	if err := paths.CheckDir(root, paths.Owner()); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = nil // no run root: nothing to collect
		}
		return func() ([]string, error) { return nil, err } // never act on what an unsafe run root holds
	}
	cleaned, err := gcRuns(root)
	sessions := make(chan []string, 1)
	go func() {
		gcGates(root)
		gcIdleCgroups(root)
		sessions <- gcSessions(root)
	}()
	return func() ([]string, error) {
		for _, id := range <-sessions {
			if !slices.Contains(cleaned, id) {
				cleaned = append(cleaned, id)
			}
		}
		return cleaned, err
	}
}

func gcRuns(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading run root: %w", err)
	}
	var cleaned []string
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		o, err := readOwner(dir)
		if errors.Is(err, fs.ErrNotExist) && ownerless(dir, e.Name()) {
			if err := (&runDir{path: dir}).remove(); err != nil {
				errs = append(errs, err)
			}
			cleaned = append(cleaned, strings.TrimSuffix(e.Name(), removingSuffix))
			continue
		}
		if err != nil {
			continue // not a run directory, or one being created right now
		}
		if o.Alive() {
			continue // its cordon is still running
		}
		if o.Workspace != "" && o.Started > 0 {
			for _, q := range sweepRepositories(o.Workspace, o.Started) {
				fmt.Fprintf(os.Stderr, "cordon: gc: run %s left a git repository armed in %s: renamed it %s\n", e.Name(), termtext.Line(o.Workspace), termtext.Line(q))
			}
		}
		if o.Stage != "" {
			// A container backend's overlay, still mounted for the engine.
			if err := linux.Unmount(filepath.Join(dir, sandbox.StageRoot)); err != nil {
				errs = append(errs, err)
			}
			// A staged run that died before it finished: its change set may be
			// partial; it is dropped, never applied.
			if st, err := loadStage(o.Stage); err != nil || !st.Finished {
				if err := linux.RemoveTree(o.Stage); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err := sealAbandoned(e.Name(), o); err != nil {
			errs = append(errs, err)
		}
		rd := loadRunDir(dir, o) // what it made, by identity: only that is removed
		if err := removeCgroup(e.Name()); err != nil {
			errs = append(errs, err)
		}
		if err := rd.remove(); err != nil {
			errs = append(errs, err)
		}
		cleaned = append(cleaned, e.Name())
	}
	return cleaned, errors.Join(errs...)
}

// ownerlessGrace is how old a run directory without an owner record must be before gc
// takes it for one a cordon left (killed between making it and writing its record)
// rather than one being created: a run writes its record within milliseconds.
const ownerlessGrace = time.Minute

// ownerless reports whether the run directory dir (named name), which has no owner
// record, is one a cordon left and gc removes: one its teardown renamed for removal
// (removingSuffix), one whose teardown had let go of its placeholders (releasedMark)
// before it removed the record, or one older than ownerlessGrace. None of these can be
// a live run's: a run writes its record before anything else, and removes it last.
func ownerless(dir, name string) bool {
	if audit.ValidateRunID(strings.TrimSuffix(name, removingSuffix)) != nil {
		return false // not a run directory (sessions, gates)
	}
	st, err := os.Lstat(dir)
	switch {
	case err != nil || !st.IsDir():
		return false
	case strings.HasSuffix(name, removingSuffix):
		return true
	}
	if _, err := os.Lstat(filepath.Join(dir, releasedMark)); err == nil {
		return true
	}
	return time.Since(st.ModTime()) > ownerlessGrace
}

// AbandonedDetail begins the detail of the run.end line gc (or cordon serve) writes
// for a run whose cordon died before it sealed its log; the rest says who sealed it.
const AbandonedDetail = "cordon died before it sealed this log (killed, out of memory, or the host went down)"

// sealAbandoned seals the log of run id, whose cordon o is gone, when it was left
// without its run.end line (audit.SealAbandoned), and says so on stderr. A log that
// does not verify up to its end is left as it is and its problem returned.
func sealAbandoned(id string, o runOwner) error {
	if o.AuditDir == "" || filepath.Base(o.AuditDir) != id || !filepath.IsAbs(o.AuditDir) {
		return nil // a run from before owner records named their log, or not this run's log
	}
	sealed, err := audit.SealAbandoned(o.AuditDir, audit.RunEnd{ExitCode: errdefs.ExitCannotRun, Reason: audit.ReasonError,
		Detail: fmt.Sprintf("%s; sealed by cordon gc (its cordon was pid %d)", AbandonedDetail, o.PID)})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // its log was pruned, or never made
	case err != nil:
		return fmt.Errorf("run %s: %w", id, err)
	case sealed:
		fmt.Fprintf(os.Stderr, "cordon: gc: run %s died before sealing its log: sealed it (%s)\n", id, termtext.Line(o.AuditDir))
	}
	return nil
}

// gcSessions removes the socket, description and log of sessions whose supervisor is
// gone.
func gcSessions(root string) []string {
	rt := paths.Root(root)
	dir := rt.Sessions()
	var gone []string
	for _, si := range wire.List(dir) {
		if si.Alive() {
			continue
		}
		for _, p := range []string{rt.SessionSocket(si.ID), rt.SessionLog(si.ID), rt.SessionInfo(si.ID)} {
			_ = os.Remove(p)
		}
		gone = append(gone, si.ID)
	}
	return gone
}

// gcGates removes the gate admin sockets (RUNROOT/gates/ID.sock) of runs whose run
// directory is gone: their cordon died without removing them.
func gcGates(root string) {
	matches, _ := filepath.Glob(filepath.Join(paths.Root(root).Gates(), "*.sock"))
	for _, m := range matches {
		id := strings.TrimSuffix(filepath.Base(m), ".sock")
		if _, err := os.Lstat(filepath.Join(root, id)); errors.Is(err, os.ErrNotExist) {
			_ = os.Remove(m)
		}
	}
}

// Placeholder reports whether path is an empty placeholder (file or directory) a run
// under root made for a denied path that did not exist (a workspace's missing
// cordon.yaml is one while a run is on): it is absent as far as the contract it stands
// for goes. It is the entry that run made (the identity it recorded), not merely one at
// a path it recorded: an empty file the user made there is the user's.
func Placeholder(root, path string) bool {
	// One look: an entry swapped in after a first (a fifo where an empty directory
	// was) is never opened to be read, nor waited on.
	id, empty, err := linux.IdentifyEmpty(path)
	if err != nil || !empty {
		return false
	}
	listed, made := placeholderAt(root, path, id)
	if made || !listed {
		return made
	}
	// Listed, and not (yet) recorded made: a run may be between making it and
	// recording what it made, which it does under the placeholder lock.
	if unlock, err := lockPlaceholders(root); err == nil {
		defer unlock()
		_, made = placeholderAt(root, path, id)
	}
	return made
}

// placeholderAt says whether an owner record under root lists path as a placeholder,
// and whether the entry id at path is one a run recorded it made or adopted (or, for
// a live run of an older cordon, which records no identities, one it lists).
func placeholderAt(root, path string, id linux.FileID) (listed, made bool) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return false, false
	}
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		o, err := readOwner(dir)
		if err != nil || !slices.Contains(o.Created, path) && !slices.Contains(o.Adopted, path) {
			continue
		}
		listed = true
		if rid, ok := loadRunDir(dir, o).identity(path); ok && rid == id || !o.Identities && o.Alive() {
			return true, true
		}
	}
	return listed, false
}

// Live reports whether run id's cordon is still running under run root: its run
// directory's owner record names a process that is alive.
func Live(root paths.Root, id string) bool {
	o, err := readOwner(root.Run(id))
	return err == nil && o.Alive()
}

// readOwner reads the owner record of the run directory dir: a regular file this user
// owns and no one else may write (paths.ReadRecord), or none.
func readOwner(dir string) (runOwner, error) {
	var o runOwner
	data, err := paths.ReadRecord(filepath.Join(dir, "owner.json"), paths.Owner())
	if err == nil {
		err = json.Unmarshal(data, &o)
	}
	return o, err
}
