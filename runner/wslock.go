package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
)

// wsLock is a run's hold on its workspace and on every directory above it
// (lockWorkspace): open directories carrying flock(2) locks, released when closed or
// when the process holding them ends.
type wsLock struct {
	dirs []*os.File
	held []fs.FileInfo // of dirs, in order
}

// release gives the workspace up. It is idempotent, and nil holds nothing.
func (l *wsLock) release() {
	if l == nil {
		return
	}
	for _, f := range l.dirs {
		f.Close()
	}
	l.dirs, l.held = nil, nil
}

// lockWorkspace takes ws for one run (or one apply): an exclusive flock on the
// workspace directory and a shared one on each directory above it. So, whatever the
// run root, the user, or the path the workspace is reached by (a link, a bind mount of
// the workspace itself: the locks are on the directories), a run or session is alone
// in its workspace tree while it lives: no other run works in it, in a directory
// inside it or in one that holds it. Another run's sandbox could otherwise rename or
// unlink, on the host, the placeholders and pinned parents this run's masks are
// mounted on, which moves or detaches the masks in this run's sandbox, or make in a
// workspace the entries this run's live quarantine takes for its own sandbox's.
// Staged runs take it the same way (a direct run inside a staged run's workspace would
// unlink the placeholders it made), and so does apply while it lands (Apply). The same
// tree reached at other paths (a bind mount of a directory above or below it, an
// overlay and its upper directory: workspaceAliases) is held the same way. A directory
// that cannot be opened (no read permission, which a sandbox may take from its own
// workspace) refuses the run: a run there could not be kept out. A refusal says the
// workspace is in use, naming the run that holds it when its owner record is under
// root: exit 125, nothing made.
func lockWorkspace(root, ws string) (*wsLock, error) {
	ws = filepath.Clean(ws)
	l := &wsLock{}
	for _, p := range append([]string{ws}, workspaceAliases(ws)...) {
		if err := l.tree(root, ws, p); err != nil {
			l.release()
			return nil, err
		}
	}
	return l, nil
}

// tree holds the directory p (ws, or a path its tree is also reachable at)
// exclusively and every directory above it shared, each directory once.
func (l *wsLock) tree(root, ws, p string) error {
	var above []string
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		above = append(above, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(above) - 1; i >= 0; i-- {
		err := l.take(above[i], true)
		if errors.Is(err, errHeld) {
			return errdefs.Unavailablef("the workspace %s is inside %s, the workspace of %s: run when it has ended, or in a workspace apart from it", ws, above[i], holder(root, func(o string) bool { return o == above[i] }, ""))
		}
		if err != nil {
			return errdefs.Unavailablef("locking the workspace %s: %w (cordon holds every directory above a workspace, to keep other runs out of its tree)", ws, err)
		}
	}
	err := l.take(p, false)
	if err == nil && p == ws {
		err = sameWorkspace(l.dirs[len(l.dirs)-1], ws)
	}
	if errors.Is(err, errHeld) {
		where := "it"
		if p != ws {
			where = "it (at " + p + ")"
		}
		h := holder(root, func(o string) bool { return inside(o, p) }, p)
		return errdefs.Unavailablef("the workspace %s is in use: %s %s; run when it has ended, or in another checkout", ws, where, h)
	}
	if err != nil {
		return errdefs.Unavailablef("locking the workspace: %w", err)
	}
	return nil
}

// holder names the live run under root whose workspace is, as far as at says, the
// one holding a lock: "run ID, which is running (pid N)", the object of "the
// workspace of"; or, for a refused workspace ws, the rest of "it ...": "is the
// workspace of run ID, ..." or "holds WS, the workspace of run ID, ...". With no such
// owner record there (another run root, an apply) it says what the holder can be.
func holder(root string, at func(ws string) bool, ws string) string {
	verb := ws != ""
	for _, l := range liveRuns(root, "") {
		if o := l.owner; at(o.Workspace) {
			run := fmt.Sprintf("run %s, which is running (pid %d)", l.id, o.PID)
			switch {
			case o.Workspace == ws:
				return "is the workspace of " + run
			case verb:
				return fmt.Sprintf("holds %s, the workspace of %s", o.Workspace, run)
			}
			return run
		}
	}
	const other = "a cordon run or session that is running (under another run root, perhaps), or a staged run being applied"
	if verb {
		return "is, or holds, the workspace of " + other
	}
	return other
}

// errHeld is take's error when another open file holds the lock.
var errHeld = errors.New("held by another")

// take opens the directory dir and locks it (shared or exclusive), keeping it; a
// directory this hold has already is not locked twice (flock(2) locks of two open
// files conflict even in one process). A lock another holds is errHeld.
func (l *wsLock) take(dir string, shared bool) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	for _, h := range l.held {
		if os.SameFile(h, fi) {
			f.Close()
			return nil
		}
	}
	lock := linux.TryLock
	if shared {
		lock = linux.TryLockShared
	}
	ok, err := lock(f)
	if err == nil && !ok {
		err = errHeld
	}
	if err != nil {
		f.Close()
		return err
	}
	l.dirs, l.held = append(l.dirs, f), append(l.held, fi)
	return nil
}

// sameWorkspace checks that the directory f holds is still the one at path: a
// workspace swapped while it was being locked would leave the run holding another.
func sameWorkspace(f *os.File, path string) error {
	a, err := f.Stat()
	if err != nil {
		return err
	}
	b, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !a.IsDir() || !os.SameFile(a, b) {
		return fmt.Errorf("%s changed while it was being locked", path)
	}
	return nil
}
