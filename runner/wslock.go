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
type wsLock struct{ dirs []*os.File }

// release gives the workspace up. It is idempotent, and nil holds nothing.
func (l *wsLock) release() {
	if l == nil {
		return
	}
	for _, f := range l.dirs {
		f.Close()
	}
	l.dirs = nil
}

// lockWorkspace takes ws for one run (or one apply): an exclusive flock on the
// workspace directory and a shared one on each directory above it. So, whatever the
// run root, the user, or the path the workspace is reached by (a link, a bind mount of
// the workspace itself: the locks are on the directories), a run or session is alone
// in its workspace tree while it lives: no other run works in it, in a directory
// inside it or in one that holds it. Another run's sandbox could otherwise rename or unlink, on the
// host, the placeholders and pinned parents this run's masks are mounted on, which
// moves or detaches the masks in this run's sandbox, or make in a workspace the
// entries this run's live quarantine takes for its own sandbox's. Staged runs take it
// the same way (a direct run inside a staged run's workspace would unlink the
// placeholders it made), and so does apply while it lands (Apply). A directory above ws that cannot be opened
// (no read permission) is not locked: a run there could not read this workspace's
// tree to begin with, unless it is another user's, and then only that user's.
// A refusal says the workspace is in use, naming the run that holds it when its
// owner record is under root: exit 125, nothing made.
func lockWorkspace(root, ws string) (*wsLock, error) {
	ws = filepath.Clean(ws)
	l := &wsLock{}
	var above []string
	for d := filepath.Dir(ws); ; d = filepath.Dir(d) {
		above = append(above, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	for i := len(above) - 1; i >= 0; i-- {
		f, err := os.Open(above[i])
		if errors.Is(err, fs.ErrPermission) {
			continue
		}
		if err == nil {
			err = l.take(f, true)
		}
		if err != nil {
			l.release()
			if !errors.Is(err, errHeld) {
				return nil, errdefs.Unavailablef("locking the workspace: %w", err)
			}
			return nil, errdefs.Unavailablef("the workspace %s is inside %s, the workspace of %s: run when it has ended, or in a workspace apart from it", ws, above[i], holder(root, func(o string) bool { return o == above[i] }, ""))
		}
	}
	f, err := os.Open(ws)
	if err == nil {
		err = l.take(f, false)
	}
	if err == nil {
		err = sameWorkspace(l.dirs[len(l.dirs)-1], ws)
	}
	if err != nil {
		l.release()
		if !errors.Is(err, errHeld) {
			return nil, errdefs.Unavailablef("locking the workspace: %w", err)
		}
		h := holder(root, func(o string) bool { return inside(o, ws) }, ws)
		return nil, errdefs.Unavailablef("the workspace %s is in use: it %s; run when it has ended, or in another checkout", ws, h)
	}
	return l, nil
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

// take locks f (shared or exclusive) and keeps it; a lock another holds is errHeld,
// and f is closed on any error.
func (l *wsLock) take(f *os.File, shared bool) error {
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
	l.dirs = append(l.dirs, f)
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
