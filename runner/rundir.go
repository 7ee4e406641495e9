package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/atomicfile"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// runOwner is a run directory's owner.json: the cordon process that owns it and what gc
// must undo once that process is gone.
type runOwner struct {
	owner.Process
	Workspace string `json:"workspace"`
	// Created are the host paths the run makes placeholders at, recorded before it
	// makes them: those it made are the ones its made record (madeRecord) gives an
	// identity; the rest were never made (its cordon was killed first, or making
	// failed), and what is at their paths is not cordon's.
	Created []string `json:"placeholders"`
	// Parents are the directories the run makes (or found another run had made) for
	// its placeholders' missing parents, each before those below it: removed after the
	// placeholders, newest first, each only while empty, still the directory made
	// (its identity), and no other live run lists it.
	Parents []string `json:"parents,omitempty"`
	// Adopted are the placeholders the run found in place, another run's (listed in
	// Created or Adopted of another owner record under the run root, with the identity
	// that run recorded), and mounts over: a placeholder is removed only by the last
	// live run that lists it (lockPlaceholders).
	Adopted []string `json:"adopted,omitempty"`
	// AdoptedIDs are the identities of the placeholders and parents the run adopted,
	// by path, as the runs that made them recorded them and this run found them: what
	// it removes, and what the runs that adopt them from it check.
	AdoptedIDs map[string]linux.FileID `json:"adopted_ids,omitempty"`
	// Identities says the run records the identities of what it makes (madeRecord)
	// and adopts (AdoptedIDs), as every cordon since they were introduced does. A live
	// run whose record does not say so is an older cordon's: its placeholders are
	// adopted by path, as it adopts them, so that neither removes one the other's mask
	// rests on while both run.
	Identities bool `json:"identities,omitempty"`
	// Contents are what the placeholder files that are not empty hold, by path.
	Contents map[string]string `json:"contents,omitempty"`
	Cgroup   string            `json:"cgroup,omitempty"`
	// Started is when the run began (Unix nanoseconds): gc disarms the git repositories
	// made or changed in its workspace since, which the run itself no longer could.
	Started int64 `json:"started,omitempty"`
	// Stage is a staged run's stage directory: gc removes it when the run died
	// before it finished (never applying anything).
	Stage string `json:"stage,omitempty"`
	// SandboxUID is the host uid the run's sandbox runs as, when its backend says
	// (sandbox.Backend.HostUID); a uid leased from cordon's range is released by the run, or
	// taken back by gc once this run's cordon is gone (package internal/uids).
	SandboxUID int `json:"sandbox_uid,omitempty"`
	// AuditDir is the run's log directory: gc seals the log of a run whose cordon
	// died before it could (audit.SealAbandoned).
	AuditDir string `json:"audit_dir,omitempty"`
}

// ownerRecord is the name of a run directory's owner record (runOwner).
const ownerRecord = "owner.json"

// madeRecord is the name of the record, beside the owner record, of the placeholders
// and parents a run made: their identities (linux.FileID) by path, written under the
// placeholder lock once they are made. Only an entry that still has the identity
// recorded is removed, by the run, by gc, or by a run that adopted it; an entry at a
// path recorded but never made, or made again by someone else since, is left alone.
// It is written without a sync (the owner record before it is synced): a machine crash
// that loses it leaves the placeholders in place, and never takes a user's file for one.
const madeRecord = "made.json"

// releasedMark is the empty file a run leaves in its directory once it has let go of
// its placeholders (removePlaceholders, under the lock): from then on it no longer
// keeps any alive, and no other run adopts one from its record. It goes with the
// directory, last: a directory holding it and no owner record is a teardown cut
// short, which gc removes (ownerless).
const releasedMark = "released"

// runDir is the host side of one run: a private directory and the placeholders
// created for denied paths that did not exist.
type runDir struct {
	path  string
	owner runOwner
	// made are the identities of the placeholders and parents the run made, by path
	// (madeRecord): one recorded in owner.Created or owner.Parents that is not here was
	// not made, and what is at its path is not this run's.
	made map[string]linux.FileID
	// stepHook, when set (tests), runs between the steps of making the placeholders
	// (step): an error stops there as a cordon killed there would.
	stepHook func(step string) error
	// placedAll: this run made and placed all its placeholders (make), leaving
	// nothing aside; unplaced: something recorded was not placed (and is not this
	// run's), so the record is written again.
	placedAll, unplaced bool
	// held holds open every placeholder and parent the run made or adopted, from its
	// making (or adoption) until removePlaceholders: while it is held, an entry made
	// at its path once the workspace removed it is never given its inode number (ext4
	// gives a freed one to the next entry made), and so never its identity where the
	// file system keeps no birth time (a directory's is then its device and inode).
	held linux.Made
}

// makeRunDir creates root/id (mode 0700) with the mask entries backends need, checking
// that root is safe all the way up (paths.MakeDir): every component owned by root or
// us, none writable by others but a sticky one, root itself ours and private.
// workspace, the log's directory and the sandbox's host uid are what its owner record
// will say, for gc and for the person reading it; the record is written by
// placeholders, once, with the placeholders it will make. Until then gc and other runs
// take the directory for one being created.
func makeRunDir(root, id, workspace, auditDir string, uid int) (*runDir, sandbox.Host, error) {
	if err := paths.MakeDir(root, paths.Owner()); err != nil {
		return nil, sandbox.Host{}, fmt.Errorf("run root: %w", err)
	}
	dir := filepath.Join(root, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, sandbox.Host{}, fmt.Errorf("creating run directory: %w", err)
	}
	h := sandbox.Host{RunID: id, RunDir: dir, MaskFile: filepath.Join(dir, "mask-file"), MaskDir: filepath.Join(dir, "mask-dir")}
	if err := os.WriteFile(h.MaskFile, nil, 0); err != nil {
		return nil, sandbox.Host{}, fmt.Errorf("creating mask: %w", err)
	}
	if err := os.Mkdir(h.MaskDir, 0); err != nil {
		return nil, sandbox.Host{}, fmt.Errorf("creating mask: %w", err)
	}
	rd := &runDir{path: dir, owner: runOwner{Process: owner.Self(), Workspace: workspace, Started: time.Now().UnixNano(), SandboxUID: uid, AuditDir: auditDir, Identities: true}}
	return rd, h, nil
}

// liveRun is a run under a run root whose cordon is running, and its owner record.
type liveRun struct {
	id    string
	owner runOwner
}

// liveRuns lists the runs under root whose cordon is alive, but self; a run root that
// cannot be read has none (no run root yet: no run).
func liveRuns(root, self string) []liveRun {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var runs []liveRun
	for _, e := range entries {
		if e.Name() == self {
			continue
		}
		if o, err := readOwner(filepath.Join(root, e.Name())); err == nil && o.Alive() {
			runs = append(runs, liveRun{e.Name(), o})
		}
	}
	return runs
}

// checkRunRoot refuses a run root the sandbox of plan could write, or that is not an
// absolute path: gc trusts what a run root holds (owner records naming placeholders to
// remove, cgroups to kill), so a sandbox that could rename or replace it would choose
// what the next cordon on this host deletes and kills.
func checkRunRoot(root string, plan *contract.Plan) error {
	if !filepath.IsAbs(root) {
		return errdefs.Invalidf("the run root %q is not an absolute path ($%s)", root, paths.RunRootEnv)
	}
	if w, ok := writableBy(plan, root); ok {
		return errdefs.Invalidf("the run root %s is inside %s, which the sandbox may write; use a run root out of its reach ($%s)", root, w, paths.RunRootEnv)
	}
	return nil
}

func (rd *runDir) save() error {
	data, _ := json.Marshal(rd.owner)
	if err := atomicfile.Write(filepath.Join(rd.path, ownerRecord), data, 0o600); err != nil {
		return fmt.Errorf("writing run owner: %w", err)
	}
	return nil
}

// saveSyncing is save with the sync run beside the caller: durable waits for it.
func (rd *runDir) saveSyncing() (durable func() error, err error) {
	data, _ := json.Marshal(rd.owner)
	synced, err := atomicfile.WriteSyncing(filepath.Join(rd.path, ownerRecord), data, 0o600)
	if err != nil {
		return nil, fmt.Errorf("writing run owner: %w", err)
	}
	return func() error {
		if err := synced(); err != nil {
			return fmt.Errorf("writing run owner: %w", err)
		}
		return nil
	}, nil
}

// markGitWritten creates paths.GitWritten in the workspace's .git when the sandbox may
// write it, before the sandbox starts: it stays after the run (it is not a placeholder),
// and the plan mounts it read-only. Anything already at that name is left as it is: its
// existence alone is what the diff baseline looks at.
func markGitWritten(plan *contract.Plan) error {
	if plan.Git != contract.GitCommit {
		return nil
	}
	p := filepath.Join(plan.Workspace, ".git", paths.GitWritten)
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	if err := linux.MakePlaceholder(p, false, paths.GitWrittenContent); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("marking %s as written by the sandbox: %w", filepath.Dir(p), err)
	}
	return nil
}

// root is the run root the run directory is in; id is the run's id.
func (rd *runDir) root() string { return filepath.Dir(rd.path) }
func (rd *runDir) id() string   { return filepath.Base(rd.path) }

// remove deletes the placeholders it made or adopted (only while they are still
// empty, and the entries it made) and the directory: release, then removeDir.
func (rd *runDir) remove() error {
	keep, err := rd.release()
	if keep {
		return err
	}
	return errors.Join(err, rd.removeDir())
}

// release removes all of the run but its owner record (and releasedMark): the
// placeholders it made or adopted that no other live run lists (removePlaceholders), what a backend mounted in the directory and what the directory
// holds. keep says the directory must stay (a mount in it could not be detached), and
// its owner record with it, for gc.
func (rd *runDir) release() (keep bool, err error) {
	perr := rd.removePlaceholders()
	if errors.Is(perr, errPlaceholderLock) {
		// Nothing was removed: the record, which names them, stays for gc.
		return true, perr
	}
	errs := []error{perr}
	// What a container backend mounted there for its engine (a staged overlay, an
	// idmapped workspace) is detached first: removing the directory must never reach
	// through a mount into the workspace it shows. Left in place when one stays.
	if err := linux.UnmountBelow(rd.path); err != nil {
		return true, errors.Join(append(errs, fmt.Errorf("run directory %s left in place: %w", rd.path, err))...)
	}
	entries, err := os.ReadDir(rd.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, fmt.Errorf("removing run directory: %w", err))
	}
	for _, e := range entries {
		if e.Name() == ownerRecord || e.Name() == releasedMark {
			continue // both go last (removeDir): the run is live until its record is gone
		}
		if err := os.RemoveAll(filepath.Join(rd.path, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("removing run directory: %w", err))
		}
	}
	return false, errors.Join(errs...)
}

// removeDir deletes the owner record, then the directory: once release has returned,
// these are all that is left (what release could not remove goes now, or stays). The
// directory is renamed ID.removing (removingSuffix) before it is emptied, so that a
// cordon killed at any point leaves gc something it knows to take (ownerless): a
// directory with releasedMark and no record, or one so named.
func (rd *runDir) removeDir() error {
	if err := os.Remove(filepath.Join(rd.path, ownerRecord)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing run owner: %w", err)
	}
	dir := rd.path
	if !strings.HasSuffix(dir, removingSuffix) {
		if err := os.Rename(dir, dir+removingSuffix); err == nil {
			dir += removingSuffix
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing run directory: %w", err)
	}
	return nil
}

// removingSuffix names a run directory being removed (removeDir): its record is gone,
// and so is all it held that mattered.
const removingSuffix = ".removing"

// markReleased leaves releasedMark in the run directory.
func (rd *runDir) markReleased() error {
	if err := os.WriteFile(filepath.Join(rd.path, releasedMark), nil, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("marking the placeholders released: %w", err)
	}
	return nil
}

// resolveExistingPrefix resolves symbolic links in the longest existing prefix of p.
func resolveExistingPrefix(p string) (string, error) {
	p = filepath.Clean(p)
	var rest []string
	for q := p; ; q = filepath.Dir(q) {
		if r, err := filepath.EvalSymlinks(q); err == nil {
			for i := len(rest) - 1; i >= 0; i-- {
				r = filepath.Join(r, rest[i])
			}
			return r, nil
		}
		if q == "/" || q == "." {
			return p, nil
		}
		rest = append(rest, filepath.Base(q))
	}
}

// DefaultInit is the binary backends run as process 1: cordon-init next to this
// executable when it is there and as trusted as this executable (same owner, not
// writable by others), else this executable itself (`cordon internal init`), which
// does the same but starts slower, carrying every engine session.
func DefaultInit() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return ""
	}
	self, err := os.Stat(exe)
	if err != nil {
		return exe
	}
	init := filepath.Join(filepath.Dir(exe), "cordon-init")
	st, err := os.Stat(init)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o022 != 0 || st.Mode().Perm()&0o111 == 0 ||
		!sameOwner(st, self) {
		return exe
	}
	return init
}
