package layer

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/safefs"
)

// StateOf describes rel in t.
func StateOf(t *linux.Tree, rel string) State {
	st, err := t.Lstat(rel)
	if err != nil {
		return State{}
	}
	return State{Exists: true, Ino: st.Ino, Ctime: st.Ctim.Nano(), Dir: st.Mode&syscall.S_IFMT == syscall.S_IFDIR}
}

// StartStamp is what a staged run records as its start (Landing.Started): the file
// clock now (linux.FileClock, read in dir), so that a change made before the start
// never conflicts and one made after always does, plus ctimeSlack, which the checks
// subtract again. A start read from the wall clock instead (a record of an older
// cordon, or where the file clock cannot be read) keeps the slack: a change up to
// 20 ms before it conflicts too.
func StartStamp(dir string, now time.Time) int64 {
	if c, err := linux.FileClock(dir); err == nil {
		return c + ctimeSlack
	}
	return now.UnixNano()
}

// EndState is StateOf for c's path at a staged run's end, the run having started at
// started (ns): a path the overlay copied up from the workspace, or an opaque
// directory (made where the sandbox had removed the workspace's entry), that the
// workspace no longer holds, in a directory changed since the start, is Gone (the
// host removed it; a path the sandbox only renamed away leaves its directory
// unchanged).
func EndState(t *linux.Tree, c Change, started int64) State {
	st := StateOf(t, c.Path)
	if st.Exists || !c.Origin && !c.Opaque {
		return st
	}
	for dir := path.Dir(c.Path); ; dir = path.Dir(dir) {
		if d := StateOf(t, dir); d.Exists {
			return State{Gone: d.Ctime >= started-ctimeSlack}
		}
		if dir == "." {
			return State{Gone: true}
		}
	}
}

// Apply lands changes in l.Workspace. It checks every change first: a path the
// contract did not let the sandbox write is refused (never landed, with or without
// Force); a conflict stops everything before anything lands unless l.Force.
func Apply(l Landing, changes []Change) (Outcome, error) {
	var out Outcome
	ws, err := linux.OpenTree(l.Workspace)
	if err != nil {
		return out, err
	}
	defer ws.Close()
	up, err := safefs.OpenDir(l.Upper, ".")
	if err != nil {
		return out, err
	}
	defer up.Close()
	var land []Change
	for _, c := range changes {
		if why := l.refuse(ws, c); why != "" {
			out.Refused = append(out.Refused, Problem{c.Path, why})
			continue
		}
		if l.conflict(ws, c) {
			out.Conflicts = append(out.Conflicts, c.Path)
		}
		land = append(land, c)
	}
	if len(out.Conflicts) > 0 && !l.Force {
		return out, fmt.Errorf("%w: %s (apply --force lands over them)", ErrConflict, strings.Join(out.Conflicts, ", "))
	}
	for _, c := range land {
		if under(c.Path, out.Refused) {
			continue
		}
		if err := l.land(ws, up, c); err != nil {
			return out, fmt.Errorf("landing %s: %w", c.Path, err)
		}
		if c.Kind != Dir || c.Opaque || !l.Ended[c.Path].Exists {
			out.Applied = append(out.Applied, c.Path)
		}
	}
	return out, nil
}

// under reports whether p is at or below a refused path: what lies in a directory
// that may not be landed is not landed either.
func under(p string, refused []Problem) bool {
	for _, r := range refused {
		if p == r.Path || isBelow(p, r.Path) {
			return true
		}
	}
	return false
}

// refuse says why c may not land ("" when it may).
func (l Landing) refuse(ws *linux.Tree, c Change) string {
	if !clean(c.Path) {
		return "not a clean workspace path"
	}
	if c.Kind == Dir && !c.Opaque && StateOf(ws, c.Path).Dir {
		return "" // a directory whose entries changed: itself unchanged
	}
	if !l.Writable(c.Path) {
		return "the contract does not let the sandbox write it"
	}
	if c.Kind == Delete || c.Opaque || StateOf(ws, c.Path).Exists {
		// What goes must all be the sandbox's to remove: a file or a link staged
		// where the workspace holds a directory replaces all of it too.
		if p := l.unwritableBelow(ws, c.Path); p != "" {
			return "it would remove " + p + ", which the contract does not let the sandbox write"
		}
	}
	return ""
}

// unwritableBelow returns a path at or below rel in the workspace that the contract
// does not let the sandbox write, or "".
func (l Landing) unwritableBelow(ws *linux.Tree, rel string) string {
	if !l.Writable(rel) {
		return rel
	}
	if !StateOf(ws, rel).Dir {
		return ""
	}
	names, _ := ws.Names(rel)
	for _, n := range names {
		if p := l.unwritableBelow(ws, path.Join(rel, n)); p != "" {
			return p
		}
	}
	return ""
}

func clean(p string) bool {
	return p != "" && p != "." && path.Clean(p) == p && !path.IsAbs(p) && p != ".." && !strings.HasPrefix(p, "../")
}

// conflict reports whether the workspace changed at c's path since the run started.
func (l Landing) conflict(ws *linux.Tree, c Change) bool {
	now := StateOf(ws, c.Path)
	if c.Kind == Dir && !c.Opaque && now.Dir {
		return false
	}
	was, recorded := l.Ended[c.Path]
	if c.Opaque && !recorded && !now.Exists {
		// An opaque directory the run's end did not list was an exact copy of the
		// workspace's (copyOf), which the host has removed since.
		return true
	}
	if now != was {
		return true
	}
	if was.Exists && was.Ctime >= l.Started-ctimeSlack {
		return true
	}
	// What goes with it: an entry deeper down changed in place changes no ctime
	// above it, and landing c removes it.
	return now.Dir && (c.Kind != Dir || c.Opaque) && l.changedBelow(ws, c.Path)
}

// changedBelow reports whether an entry below the workspace directory rel changed
// since the run started (a directory's ctime moves when an entry is added, removed
// or renamed in it; a file's when it is written).
func (l Landing) changedBelow(ws *linux.Tree, rel string) bool {
	names, err := ws.Names(rel)
	if err != nil {
		return true // unreadable now: nothing vouches for it
	}
	for _, n := range names {
		p := path.Join(rel, n)
		st := StateOf(ws, p)
		if !st.Exists || st.Ctime >= l.Started-ctimeSlack || st.Dir && l.changedBelow(ws, p) {
			return true
		}
	}
	return false
}

// land makes the workspace hold c.
func (l Landing) land(ws *linux.Tree, up *safefs.Dir, c Change) error {
	now := StateOf(ws, c.Path)
	switch c.Kind {
	case Delete:
		return removeAll(ws, c.Path, 0)
	case Dir:
		if now.Exists && !now.Dir {
			if err := ws.Remove(c.Path); err != nil {
				return err
			}
		}
		if err := ws.Mkdir(c.Path, c.Mode, l.UID, l.GID); err != nil {
			return err
		}
		if err := l.dirMeta(ws, up, c, now); err != nil {
			return err
		}
		if c.Opaque {
			return l.emptyExcept(ws, up, c.Path)
		}
		return nil
	}
	if now.Dir {
		if err := removeAll(ws, c.Path, 0); err != nil {
			return err
		}
	}
	if c.Kind == Symlink {
		return ws.Symlink(c.Path, c.Target, l.UID, l.GID)
	}
	f, err := up.Open(c.Path, safefs.NoLimit)
	if errors.Is(err, safefs.ErrNotRegular) {
		return fmt.Errorf("the staged file is no longer a regular file")
	}
	if err != nil {
		return err
	}
	defer f.Close()
	// Its mtime and user.* attributes land with it: the diff showed them (what
	// else it carries, Read named).
	_, err = ws.WriteFileLike(c.Path, f, c.Mode, l.UID, l.GID)
	return err
}

// dirMeta lands a staged directory's metadata: its user.* attributes (what else it
// carries, Read named; a copied-up directory holds the workspace's, so an existing
// one's that it lacks were removed) and an existing one's permission bits when the
// sandbox changed them (a copied-up directory keeps the workspace's unless it did).
func (l Landing) dirMeta(ws *linux.Tree, up *safefs.Dir, c Change, was State) error {
	if was.Exists && was.Dir && !c.Opaque {
		if !l.Writable(c.Path) {
			return nil // a path the sandbox may not write it could not change either
		}
		st, err := ws.Lstat(c.Path)
		if err != nil {
			return err
		}
		if st.Mode&0o777 != c.Mode&0o777 {
			if err := ws.Chmod(c.Path, c.Mode&0o777); err != nil {
				return err
			}
		}
	}
	src, err := up.OpenDirFile(c.Path)
	if err != nil {
		return err
	}
	defer src.Close()
	_, err = ws.CopyXattrs(c.Path, src)
	return err
}

// emptyExcept removes the entries of the workspace directory rel that the upper
// directory up does not hold (an opaque directory replaced them).
func (l Landing) emptyExcept(ws *linux.Tree, up *safefs.Dir, rel string) error {
	keep := map[string]bool{}
	kept, _ := up.Names(rel, 0)
	for _, n := range kept {
		keep[n] = true
	}
	names, err := ws.Names(rel)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !keep[n] {
			if err := removeAll(ws, path.Join(rel, n), 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeAll removes rel and, for a directory, everything below it, deepest first: a
// batch of names at a time, read again until none is left, so that a directory holds
// at most a batch of its names in memory at each level. Past max entries removed from
// one directory (0: no bound), it stops with [ErrTooMany]: something may be filling
// it as fast as they go.
func removeAll(ws *linux.Tree, rel string, max int) error {
	if StateOf(ws, rel).Dir {
		removed := 0
		for {
			names, err := ws.ReadNames(rel, namesBatch)
			if err != nil {
				return err
			}
			if len(names) == 0 {
				break
			}
			if removed += len(names); max > 0 && removed > max {
				return tooMany(max)
			}
			for _, n := range names {
				if err := removeAll(ws, path.Join(rel, n), max); err != nil {
					return err
				}
			}
		}
	}
	return ws.Remove(rel)
}
