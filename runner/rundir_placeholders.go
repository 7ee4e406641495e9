package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/atomicfile"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
)

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
// The record is written once, before anything it names is made or adopted: every
// placeholder is recorded before it is made. It is made durable beside the making,
// and placeholders returns only once it is: the sandbox starts after, and what gc
// does for a run the machine's crash ended (the sweep of the git repositories its
// sandbox made, its log's seal) needs the record to outlive everything the sandbox
// wrote. Placeholders made before a crash that lost the record stay, as those of a
// lost made record do (below), never a user's file taken for one. Once they are made,
// still under the lock, their identities are recorded (madeRecord): what this run, gc
// after a crash, or a run that adopts them removes is only what has that identity. A
// cordon killed in between leaves them in place. check, when not nil, runs between
// the record and the first placeholder (tests stop a run there); when it fails,
// nothing is made. No other live run works in the workspace tree meanwhile
// (lockWorkspace): what another run's record lists is a dead run's, or an older
// cordon's that takes no workspace lock.
func (rd *runDir) placeholders(plan *contract.Plan, check func() error) (err error) {
	unlock, err := lockPlaceholders(rd.root())
	if err != nil {
		return err
	}
	defer unlock()
	todo := rd.decide(plan, otherPlaceholders(rd.root(), rd.id(), true))
	// Recorded once, all of them, before any is made: a run starts with a dozen.
	durable, err := rd.saveSyncing()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, durable()) }()
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	if len(todo) == 0 {
		rd.placedAll = true
		return nil
	}
	// Still under the lock: a run that decides after this one adopts only what it finds
	// recorded here. Each level's record was written before it was placed; written
	// again when something recorded was not placed.
	if err := rd.make(todo); err != nil || rd.unplaced {
		return errors.Join(err, rd.saveMade())
	}
	return nil
}

// decide settles, for each of plan's placeholders, whether this run makes it (with
// its missing parents) or adopts the one another run left (others: the run root's
// records), and records both in rd's owner record (not yet saved). It returns what to
// make, in order: each placeholder after its missing parents.
func (rd *runDir) decide(plan *contract.Plan, others map[string]listing) []linux.Placeholder {
	var todo []linux.Placeholder
	parents := parentPlan{others: others, known: map[string]bool{}, ids: map[string]linux.FileID{}, held: &rd.held}
	for _, m := range plan.Mounts {
		l, listed := others[m.Path]
		if m.Create == contract.PlaceholderParent || listed && l.parent {
			if parents.dir(m.Path, l) {
				todo = append(todo, linux.Placeholder{Path: m.Path, Parent: true})
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
			id, ok := l.holds(m.Path, &rd.held)
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
				todo = append(todo, linux.Placeholder{Path: d, Parent: true})
			}
			dir := m.Create == contract.PlaceholderDir || m.Create == contract.NoPlaceholder && m.Dir
			todo = append(todo, linux.Placeholder{Path: m.Path, Dir: dir, Content: content})
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
	return todo
}

// make makes todo (decide's), in order, recording the identity of each it made in
// rd.made. Each is made aside first, under a name of this run's (aside), its identity
// recorded (madeRecord), and only then given its name (linux.PlacePlaceholders): a
// cordon killed at any point leaves at a placeholder's path nothing but what its
// record proves it made, and aside only what gc removes by that name. They go by
// levels (level): what is placed in a directory the same level made must wait until
// that directory has its name. A parent found made already (by the user since it was
// looked at) is skipped: not this run's.
func (rd *runDir) make(todo []linux.Placeholder) error {
	// No link is followed on the way: the workspace is the sandbox's to write, and a
	// link planted since Compile must not make cordon create anything elsewhere.
	if rd.made == nil {
		rd.made = map[string]linux.FileID{}
	}
	for first := true; len(todo) > 0; first = false {
		if !first {
			if err := rd.step("next level"); err != nil {
				return err
			}
		}
		n := level(todo)
		if err := rd.makeLevel(todo[:n]); err != nil {
			return err
		}
		todo = todo[n:]
	}
	rd.placedAll = true
	return nil
}

// level is how many of todo's first entries need none of the others among them: up
// to the first one in a directory an earlier one makes.
func level(todo []linux.Placeholder) int {
	making := map[string]bool{}
	for i, p := range todo {
		if making[filepath.Dir(p.Path)] {
			return i
		}
		making[p.Path] = true
	}
	return len(todo)
}

// makeLevel makes ps aside, records them, and places them (see make).
func (rd *runDir) makeLevel(ps []linux.Placeholder) error {
	aside := make([]linux.Placeholder, len(ps))
	for i, p := range ps {
		aside[i] = p
		aside[i].Path = rd.aside(p.Path)
	}
	// What was made stays open until the run removes it (rd.held), so that the
	// identity placed, and every one compared to it later (the quarantine, the live
	// watch, the removal), is one no other entry can have been given meanwhile.
	made, merr := linux.MakePlaceholders(aside)
	rd.held.Take(made)
	ids := made.IDs
	for j, id := range ids {
		rd.made[ps[j].Path] = id
	}
	if err := rd.step("aside"); err != nil {
		return err
	}
	if err := rd.saveMade(); err != nil {
		return err // what is aside stays: gc removes it by its name
	}
	if err := rd.step("recorded"); err != nil {
		return err
	}
	var errs []error
	placed, perrs := linux.PlacePlaceholders(aside[:len(ids)], ps[:len(ids)])
	for j, id := range placed {
		// What was renamed is not what was made aside (the workspace swapped it in
		// between): not this run's, and never taken for its placeholder. The birth
		// time, where it is kept, tells a later entry given the same inode number; the
		// change time the rename sets is not looked at.
		if perrs[j] == nil && (id.Dev != ids[j].Dev || id.Ino != ids[j].Ino || id.Birth != ids[j].Birth) {
			perrs[j] = errAsideSwapped
		}
	}
	if rd.restamped(ps, ids, placed) {
		if err := rd.saveMade(); err != nil {
			errs = append(errs, err)
		}
	}
	for j, err := range perrs {
		if err == nil {
			continue
		}
		// Not placed: what is at its path is not this run's, and what it made aside goes.
		delete(rd.made, ps[j].Path)
		rd.unplaced = true
		aside[j].ID = ids[j]
		if rerr := linux.RemovePlaceholders(aside[j : j+1])[0]; rerr != nil {
			errs = append(errs, placeholderErr(aside[j].Path, rerr))
		}
		if !errors.Is(err, fs.ErrExist) || !ps[j].Parent {
			errs = append(errs, fmt.Errorf("creating placeholder for denied path %s: %w", ps[j].Path, err))
		}
	}
	if merr != nil {
		errs = append(errs, fmt.Errorf("creating placeholder for denied path %s: %w", ps[len(ids)].Path, merr))
	}
	return errors.Join(errs...)
}

// errAsideSwapped is a placeholder made aside found replaced once renamed into place:
// what is at its path is not the run's.
var errAsideSwapped = errors.New("the entry made aside was replaced before it was placed")

// restamped records the identities placed has for ps (linux.PlacePlaceholders)
// where they are those of the entries made aside (made) but for their change time,
// and says whether any was: where the file system keeps no birth time, a file's
// identity holds its change time, which the rename into place sets, and a record of
// the one before would leave the placed file for the user's, in the workspace for
// good. A cordon killed between the rename and this record still leaves it.
func (rd *runDir) restamped(ps []linux.Placeholder, made, placed []linux.FileID) bool {
	changed := false
	for j, id := range placed {
		if id != made[j] && id.Dev == made[j].Dev && id.Ino == made[j].Ino && id.Birth == 0 && made[j].Birth == 0 {
			rd.made[ps[j].Path], changed = id, true
		}
	}
	return changed
}

// aside is the name in p's directory that the run makes p under before p has its own
// (make): the run's id and a digest of p's name, which no one else gives.
func (rd *runDir) aside(p string) string {
	sum := sha256.Sum256([]byte(filepath.Base(p)))
	return filepath.Join(filepath.Dir(p), asidePrefix+rd.id()+"-"+hex.EncodeToString(sum[:8]))
}

// asidePrefix starts the name a placeholder is made under before it is placed.
const asidePrefix = ".cordon-placing-"

// step runs rd.stepHook, tests' stop between the steps of make.
func (rd *runDir) step(name string) error {
	if rd.stepHook == nil {
		return nil
	}
	return rd.stepHook(name)
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
	held   *linux.Made             // holds the directories adopted (runDir.held)
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
		id, ok := pp.others[d].holds(d, pp.held)
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
	if id, ok := l.holds(p, pp.held); ok {
		pp.dirs, pp.ids[p] = append(pp.dirs, p), id
	}
	return false
}

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
// cordon's live run, byPath). That entry is held open in held from then on (when not
// nil), as the run's own are (runDir.held): the identity is taken of what is held.
func (l listing) holds(p string, held *linux.Made) (linux.FileID, bool) {
	if len(l.ids) == 0 && !l.byPath {
		return linux.FileID{}, false
	}
	var m linux.Made
	defer m.Release()
	id, err := m.Hold(p)
	if err != nil || !l.byPath && !slices.Contains(l.ids, id) {
		return linux.FileID{}, false
	}
	if held != nil {
		held.Take(&m)
	}
	return id, true
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
	// What the run holds is let go once its removal is done, or given up: the sandbox
	// is gone by then, and the record names what stays for gc.
	defer rd.held.Release()
	var ps, dirs []linux.Placeholder
	for _, p := range slices.Concat(rd.owner.Created, rd.owner.Adopted) {
		if id, ok := rd.identity(p); ok {
			ps = append(ps, linux.Placeholder{Path: p, Content: rd.owner.Contents[p], ID: id})
		}
	}
	// What a cordon killed in make left aside, recorded or not (an aside name is
	// this run's alone), looked for unless this run placed everything itself: before
	// the placed ones, as it was made before them.
	if !rd.placedAll {
		for _, p := range rd.owner.Created {
			ps = append(ps, linux.Placeholder{Path: rd.aside(p), Content: rd.owner.Contents[p], Aside: true})
		}
	}
	for _, d := range rd.owner.Parents {
		if id, ok := rd.identity(d); ok {
			dirs = append(dirs, linux.Placeholder{Path: d, Dir: true, ID: id})
		}
		if !rd.placedAll {
			dirs = append(dirs, linux.Placeholder{Path: rd.aside(d), Dir: true, Aside: true})
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
		if err != nil && !errors.Is(err, linux.ErrReplaced) && !unreached(ps[i], err) { // replaced: the user's, left alone
			errs = append(errs, placeholderErr(ps[i].Path, err))
		}
	}
	// Then the parents, newest first: one that holds anything else now (the sandbox's
	// files, the user's), or another directory in its place, is simply kept.
	dirs = slices.DeleteFunc(dirs, kept)
	slices.Reverse(dirs)
	for i, err := range linux.RemovePlaceholders(dirs) {
		if err != nil && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, linux.ErrNotPlaceholder) && !errors.Is(err, linux.ErrReplaced) && !unreached(dirs[i], err) {
			errs = append(errs, fmt.Errorf("removing the parent directory %s of a placeholder: %w", dirs[i].Path, err))
		}
	}
	return errors.Join(errs...)
}

// unreached says whether err is the aside name p not reached without following a
// link (a parent replaced by one, or by a file), or holding what is no placeholder
// (filled, or planted there: a link, a fifo): nothing the run made aside is there,
// as it made it, and what is there is whoever put it there's.
func unreached(p linux.Placeholder, err error) bool {
	return p.Aside && (errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, linux.ErrNotPlaceholder) || errors.Is(err, syscall.ENOTEMPTY))
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
