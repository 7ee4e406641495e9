package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
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

// saveMade writes the run's made record (madeRecord), unsynced.
func (rd *runDir) saveMade() error {
	data, _ := json.Marshal(rd.made)
	if err := atomicfile.WriteUnsynced(filepath.Join(rd.path, madeRecord), data, 0o600); err != nil {
		return fmt.Errorf("recording the placeholders made: %w", err)
	}
	return nil
}

// readMade reads the made record (madeRecord) of the run directory dir: none, or one
// that cannot be read, is nothing made.
func readMade(dir string) map[string]linux.FileID {
	var made map[string]linux.FileID
	data, err := paths.ReadRecord(filepath.Join(dir, madeRecord), paths.Owner())
	if err != nil || json.Unmarshal(data, &made) != nil {
		return nil
	}
	return made
}

// loadRunDir is the run directory dir whose owner record is o, with its made record.
func loadRunDir(dir string, o runOwner) *runDir {
	return &runDir{path: dir, owner: o, made: readMade(dir)}
}

// identity returns the identity of the placeholder or parent p the run made or
// adopted; ok is false for one it did neither (recorded, never made).
func (rd *runDir) identity(p string) (id linux.FileID, ok bool) {
	if id, ok = rd.made[p]; ok {
		return id, true
	}
	id, ok = rd.owner.AdoptedIDs[p]
	return id, ok
}

// adopt records the identity id of another run's placeholder or parent p this run
// adopts.
func (rd *runDir) adopt(p string, id linux.FileID) {
	if rd.owner.AdoptedIDs == nil {
		rd.owner.AdoptedIDs = map[string]linux.FileID{}
	}
	rd.owner.AdoptedIDs[p] = id
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

// placeholders writes the run's owner record and creates the host entries the plan
// needs so that denied paths that do not exist yet cannot be created by the sandbox.
// A path the plan mounts over that holds another run's placeholder (listed in another
// owner record under the run root, and still the entry that run made: the identity
// it recorded) is adopted: recorded in owner.Adopted with that identity, so that the
// run that made it leaves it in place while this one mounts over it (removePlaceholders);
// one another run recorded but that is gone is made again. Anything else already at a
// path is the user's (or a sandbox's): mounted over as it is, never removed. All of it
// is decided under the run root's placeholder lock (lockPlaceholders), so that no run
// removes a placeholder between this one finding it and recording it.
// The record is written once (a synced write), before anything it names is made or
// adopted: every placeholder is recorded before it is made. Once they are made,
// still under the lock, their identities are recorded (madeRecord): what this run, gc
// after a crash, or a run that adopts them removes is only what has that identity. A
// cordon killed in between leaves them in place. check, when not nil, runs between
// the record and the first placeholder (tests stop a run there); when it fails,
// nothing is made. No other live run works in the workspace tree meanwhile
// (lockWorkspace): what another run's record lists is a dead run's, or an older
// cordon's that takes no workspace lock.
func (rd *runDir) placeholders(plan *contract.Plan, check func() error) error {
	unlock, err := lockPlaceholders(rd.root())
	if err != nil {
		return err
	}
	defer unlock()
	others := otherPlaceholders(rd.root(), rd.id(), true)
	// todo is what to make, in order: each placeholder after its missing parents.
	var todo []linux.Placeholder
	var parent []bool // todo[i] is a parent directory
	parents := parentPlan{others: others, known: map[string]bool{}, ids: map[string]linux.FileID{}}
	for _, m := range plan.Mounts {
		l, listed := others[m.Path]
		if m.Create == contract.PlaceholderParent || listed && l.parent {
			if parents.dir(m.Path, l) {
				todo, parent = append(todo, linux.Placeholder{Path: m.Path, Parent: true}), append(parent, true)
			}
			continue
		}
		if m.Create == contract.NoPlaceholder && !listed {
			continue // not a placeholder: it was there at Compile, or needs none
		}
		content := m.Content
		if l.held || m.Create == contract.NoPlaceholder {
			content = l.content // what the other run's placeholder holds
		}
		if _, err := os.Lstat(m.Path); err == nil {
			id, ok := l.holds(m.Path)
			if !ok {
				// Appeared since Compile, or at a path a run recorded but never made
				// (or made, and removed since): the user's, mounted over as it is.
				continue
			}
			rd.owner.Adopted = append(rd.owner.Adopted, m.Path)
			rd.adopt(m.Path, id)
			parents.add(m.Path, false) // those above it other runs made
		} else {
			// Missing, or another run's placeholder at Compile (NoPlaceholder) that
			// its run has removed since: this run makes its own.
			for _, d := range parents.add(m.Path, true) {
				todo, parent = append(todo, linux.Placeholder{Path: d, Parent: true}), append(parent, true)
			}
			dir := m.Create == contract.PlaceholderDir || m.Create == contract.NoPlaceholder && m.Dir
			todo, parent = append(todo, linux.Placeholder{Path: m.Path, Dir: dir, Content: content}), append(parent, false)
			rd.owner.Created = append(rd.owner.Created, m.Path)
		}
		if content != "" {
			if rd.owner.Contents == nil {
				rd.owner.Contents = map[string]string{}
			}
			rd.owner.Contents[m.Path] = content
		}
	}
	rd.owner.Parents = parents.dirs
	for d, id := range parents.ids {
		rd.adopt(d, id)
	}
	// Recorded once, all of them, before any is made: a run starts with a dozen.
	if err := rd.save(); err != nil {
		return err
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	if len(todo) == 0 {
		return nil
	}
	// No link is followed on the way: the workspace is the sandbox's to write, and a
	// link planted since Compile must not make cordon create anything elsewhere.
	if rd.made == nil {
		rd.made = map[string]linux.FileID{}
	}
	var makeErr error
	for i := 0; i < len(todo); {
		ids, merr := linux.MakePlaceholders(todo[i:])
		for j, id := range ids {
			rd.made[todo[i+j].Path] = id
		}
		if i += len(ids); merr == nil {
			break
		}
		// A parent found made (earlier in this batch, or by the user since it was
		// looked at) is no error; made by someone else, it is not this run's to remove.
		if !errors.Is(merr, fs.ErrExist) || !parent[i] {
			makeErr = fmt.Errorf("creating placeholder for denied path %s: %w", todo[i].Path, merr)
			break
		}
		i++
	}
	// Still under the lock: a run that decides after this one adopts only what it finds
	// recorded here.
	return errors.Join(makeErr, rd.saveMade())
}

// parentPlan gathers the parent directories of a run's placeholders that it records
// (runOwner.Parents): the missing ones of those it makes, and those another run
// made above those it adopts (with their identities, ids), each listed once and after
// the ones above it.
type parentPlan struct {
	others map[string]listing
	known  map[string]bool // directories looked at: listed, or there and not another run's
	dirs   []string
	ids    map[string]linux.FileID // the directories adopted, another run's
}

// add adds the parents of the placeholder p and returns those to make, the highest
// first: up from p's parent, every directory there that another run made and lists,
// and, when p is to be made, every one missing. p itself is known from then on (a
// parent of later ones).
func (pp *parentPlan) add(p string, making bool) (mk []string) {
	defer func() { pp.known[p] = true }()
	var adopted []string
	for d := filepath.Dir(p); d != filepath.Dir(d) && !pp.known[d]; d = filepath.Dir(d) {
		pp.known[d] = true
		if _, err := os.Lstat(d); err != nil {
			if !making {
				break
			}
			mk = append(mk, d)
			continue
		}
		id, ok := pp.others[d].holds(d)
		if !ok {
			break // the user's, and so is all above it
		}
		adopted, pp.ids[d] = append(adopted, d), id
	}
	// Every missing one is below every one there.
	slices.Reverse(adopted)
	slices.Reverse(mk)
	pp.dirs = append(append(pp.dirs, adopted...), mk...)
	return mk
}

// dir adds the directory p that a mount pins, made to hold a placeholder (by this run,
// or by another that lists it, l): recorded when it is missing, or there and the one
// another run made (adopted); one there that is not is the user's. mk says whether to
// make it (a directory found made is no error).
func (pp *parentPlan) dir(p string, l listing) (mk bool) {
	pp.known[p] = true
	if _, err := os.Lstat(p); err != nil {
		pp.dirs = append(pp.dirs, p)
		return true
	}
	if id, ok := l.holds(p); ok {
		pp.dirs, pp.ids[p] = append(pp.dirs, p), id
	}
	return false
}

// root is the run root the run directory is in; id is the run's id.
func (rd *runDir) root() string { return filepath.Dir(rd.path) }
func (rd *runDir) id() string   { return filepath.Base(rd.path) }

// lockPlaceholders takes the run root's placeholder lock (paths.Root.PlaceholderLock),
// waiting for the run that holds it: a run decides which placeholders it makes or
// adopts, and records them, under it; a run (or gc) decides which it removes, and
// removes them, under it. So a run that adopts a placeholder before another's removal
// keeps it, and one that comes after finds it gone and makes its own. unlock releases it.
func lockPlaceholders(root string) (unlock func(), err error) {
	f, err := os.OpenFile(paths.Root(root).PlaceholderLock(), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the placeholder lock: %w", err)
	}
	// Waited for as the uid lease lock is (internal/uids): held for a few milliseconds,
	// so a wait this long means a holder that does not run (a cordon suspended with ^Z).
	deadline := time.Now().Add(placeholderLockWait)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		ok, err := linux.TryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("taking the placeholder lock: %w", err)
		}
		if ok {
			return func() { f.Close() }, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%w: waited %v for %s: another cordon holds it and does not let go (a suspended one? resume or kill it)",
				errPlaceholderLock, placeholderLockWait, f.Name())
		}
		time.Sleep(wait)
	}
}

// placeholderLockWait bounds the wait for the placeholder lock (a variable for tests).
var placeholderLockWait = 30 * time.Second

// errPlaceholderLock is the placeholder lock not had in time: a run does not start,
// and a teardown leaves its placeholders, and the record naming them, to gc.
var errPlaceholderLock = errdefs.Unavailablef("the placeholder lock is held")

// listing is how the other owner records under a run root list a placeholder path:
// held says a run that has not let go of its placeholders (releasedMark) lists it, so
// the placeholder stays for that run; content is what the placeholder file holds.
type listing struct {
	content string
	held    bool
	parent  bool // listed only as a directory made to hold placeholders (runOwner.Parents)
	// ids are the identities the runs that hold it recorded for it (made or adopted):
	// only an entry with one of them is the placeholder they keep.
	ids []linux.FileID
	// byPath says a live run of an older cordon, which records no identities
	// (runOwner.Identities), holds it: whatever entry is at its path.
	byPath bool
}

// keeps says whether a run that holds the placeholder keeps the entry id: one it made
// or adopted (or any, for an older cordon's live run). A run that lists the path but
// has no identity for it never made it, and never removes it: it keeps nothing.
func (l listing) keeps(id linux.FileID) bool {
	return l.held && (l.byPath || slices.Contains(l.ids, id))
}

// holds returns the identity of the entry at p when it is the placeholder (or parent)
// a run that keeps it made: that entry, not merely its path (but for an older
// cordon's live run, byPath).
func (l listing) holds(p string) (linux.FileID, bool) {
	if len(l.ids) == 0 && !l.byPath {
		return linux.FileID{}, false
	}
	id, err := linux.Identify(p)
	return id, err == nil && (l.byPath || slices.Contains(l.ids, id))
}

// otherPlaceholders are the placeholders the owner records under root list (Created
// and Adopted), but self's. dead says whether the records of runs whose cordon is gone
// count: they do for deciding (gc has not removed their placeholders yet), not for
// removing (only a live run keeps one alive). Called with the placeholder lock held.
func otherPlaceholders(root, self string, dead bool) map[string]listing {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	listed := map[string]listing{}
	for _, e := range entries {
		if e.Name() == self || !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		o, err := readOwner(dir)
		if err != nil || !dead && !o.Alive() {
			continue
		}
		_, err = os.Lstat(filepath.Join(dir, releasedMark))
		held := errors.Is(err, fs.ErrNotExist)
		var ids map[string]linux.FileID
		var byPath bool
		if held {
			ids = loadRunDir(dir, o).ids()
			byPath = !o.Identities && (!dead || o.Alive())
		}
		add := func(l listing, p string) listing {
			if id, ok := ids[p]; ok {
				l.ids = append(slices.Clip(l.ids), id)
			}
			l.byPath = l.byPath || byPath
			return l
		}
		for _, p := range slices.Concat(o.Created, o.Adopted) {
			l := listed[p]
			listed[p] = add(listing{content: o.Contents[p], held: held || l.held, ids: l.ids, byPath: l.byPath}, p)
		}
		for _, p := range o.Parents {
			l, ok := listed[p]
			listed[p] = add(listing{held: held || l.held, parent: !ok || l.parent, ids: l.ids, byPath: l.byPath}, p)
		}
	}
	return listed
}

// ids are the identities of all the run made or adopted, by path.
func (rd *runDir) ids() map[string]linux.FileID {
	ids := maps.Clone(rd.made)
	if ids == nil {
		ids = map[string]linux.FileID{}
	}
	maps.Copy(ids, rd.owner.AdoptedIDs)
	return ids
}

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

// removePlaceholders deletes the placeholders it made or adopted that no other live
// run keeps (lists with the same identity), newest first, each only while it is still the entry made (its identity)
// and empty (removeIfEmpty), then their parents it made or adopted
// (runOwner.Parents) that are empty, and leaves releasedMark: all of it under the
// placeholder lock (lockPlaceholders). A placeholder another live run lists stays for
// that run's mask: unlinking it would detach that mask in the other run's sandbox, and
// the last run to end removes it. One recorded but never made (no identity) is not
// looked at: what is at its path is not cordon's. The owner record still names them:
// a cordon that dies meanwhile leaves them to gc, and once they are gone whatever
// takes their paths has another identity, which neither gc nor a run that adopts from
// this record takes for them.
func (rd *runDir) removePlaceholders() error {
	var ps, dirs []linux.Placeholder
	for _, p := range slices.Concat(rd.owner.Created, rd.owner.Adopted) {
		if id, ok := rd.identity(p); ok {
			ps = append(ps, linux.Placeholder{Path: p, Content: rd.owner.Contents[p], ID: id})
		}
	}
	for _, d := range rd.owner.Parents {
		if id, ok := rd.identity(d); ok {
			dirs = append(dirs, linux.Placeholder{Path: d, Dir: true, ID: id})
		}
	}
	if len(ps)+len(dirs) == 0 {
		return rd.markReleased() // no other run cares: no lock
	}
	unlock, err := lockPlaceholders(rd.root())
	if err != nil {
		return fmt.Errorf("placeholders left in place: %w", err)
	}
	defer unlock()
	others := otherPlaceholders(rd.root(), rd.id(), false)
	kept := func(p linux.Placeholder) bool { return others[p.Path].keeps(p.ID) }
	ps = slices.DeleteFunc(ps, kept)
	slices.Reverse(ps)
	var errs []error
	// Let go before the lock is released: a run that decides after this one must not
	// take these for placeholders this run keeps alive.
	if err := rd.markReleased(); err != nil {
		errs = append(errs, err)
	}
	for i, err := range linux.RemovePlaceholders(ps) {
		if err != nil && !errors.Is(err, linux.ErrReplaced) { // replaced: the user's, left alone
			errs = append(errs, placeholderErr(ps[i].Path, err))
		}
	}
	// Then the parents, newest first: one that holds anything else now (the sandbox's
	// files, the user's), or another directory in its place, is simply kept.
	dirs = slices.DeleteFunc(dirs, kept)
	slices.Reverse(dirs)
	for i, err := range linux.RemovePlaceholders(dirs) {
		if err != nil && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, linux.ErrNotPlaceholder) && !errors.Is(err, linux.ErrReplaced) {
			errs = append(errs, fmt.Errorf("removing the parent directory %s of a placeholder: %w", dirs[i].Path, err))
		}
	}
	return errors.Join(errs...)
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

// removeIfEmpty removes a placeholder still the entry id and empty (or holding
// exactly content), following no symbolic link: one the sandbox planted on the way (or
// at p) is never followed out of the workspace.
func removeIfEmpty(p, content string, id linux.FileID) error {
	if err := linux.RemovePlaceholder(p, content, id); err != nil {
		return placeholderErr(p, err)
	}
	return nil
}

// placeholderErr says why the placeholder p was not removed.
func placeholderErr(p string, err error) error {
	switch {
	case errors.Is(err, linux.ErrNotPlaceholder) || errors.Is(err, syscall.ENOTEMPTY):
		return fmt.Errorf("placeholder %s is no longer empty; left in place", p)
	case errors.Is(err, linux.ErrReplaced):
		return fmt.Errorf("%s is no longer the placeholder cordon made; left in place", p)
	}
	return fmt.Errorf("removing placeholder %s: %w", p, err)
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
