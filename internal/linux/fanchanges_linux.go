package linux

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// changeMask is what WatchChanges asks for beyond WatchCreates: every event that
// changes a name, a file's content or its attributes. FAN_OPEN comes later
// (WatchOpens). Not FAN_DELETE_SELF nor FAN_MOVE_SELF: the name removed or moved is
// an event of its directory already, and each would cost a handle to resolve.
const changeMask = unix.FAN_MODIFY | unix.FAN_ATTRIB | unix.FAN_DELETE | unix.FAN_MOVED_FROM

// WatchOpens adds the opening of files to what a WatchChanges watch records: the one
// event an mmap write cannot do without (it changes a file's pages with no
// FAN_MODIFY, and its FAN_CLOSE_WRITE may come late, or never while the watch runs: a
// file's last reference can be held in flight on a socket, or by an io_uring, and
// dropped by the kernel's own workers after the command is gone). Call it once the
// baseline has read the workspace (whose own opens would be recorded) and before the
// command runs. On failure the change set is marked untrusted.
func (w *CreateWatch) WatchOpens(dir string) error {
	if w.log == nil {
		return nil
	}
	err := unix.FanotifyMark(w.fd, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, unix.FAN_OPEN|unix.FAN_ONDIR, unix.AT_FDCWD, dir)
	if err != nil {
		err = fmt.Errorf("fanotify_mark FAN_OPEN %s: %w", dir, err)
		w.log.distrust(err.Error())
	}
	return err
}

// UnwatchOpens takes the opening of files out of what a WatchChanges watch records
// again (WatchOpens put it in): a session records opens only while a process of its
// sandbox may run, and its own reads of what changed are no change. FAN_ONDIR stays
// in the mark: without it no event of a directory (one made, removed or moved) would
// be reported at all.
func (w *CreateWatch) UnwatchOpens(dir string) error {
	if w.log == nil {
		return nil
	}
	err := unix.FanotifyMark(w.fd, unix.FAN_MARK_REMOVE|unix.FAN_MARK_FILESYSTEM, unix.FAN_OPEN, unix.AT_FDCWD, dir)
	if err != nil {
		err = fmt.Errorf("fanotify_mark remove FAN_OPEN %s: %w", dir, err)
		w.log.distrust(err.Error())
	}
	return err
}

// IdleAfter bounds what recording changes costs while nothing of a sandbox runs: the
// mark is the whole file system's, so every write of every process on it is an event
// the watch reads (4 µs each on the 2-core VM of the benchmarks). Once n more events
// have been read, the watch stops asking the kernel for changes (creations are still
// reported) and the set being recorded is untrusted, saying so; Busy asks again. A
// session calls it when a command ends leaving nothing running, and Busy before the
// next command's take, whose set then walks.
func (w *CreateWatch) IdleAfter(n int) {
	if w.log == nil || n <= 0 {
		return
	}
	l := w.log
	l.mu.Lock()
	l.idleLeft, l.idleOf = n, n
	l.mu.Unlock()
}

// Busy undoes IdleAfter: changes are asked for again (if they had stopped, the set
// being recorded stays untrusted until taken). If they cannot be, no set of the watch
// is trusted from then on.
func (w *CreateWatch) Busy() error {
	if w.log == nil {
		return nil
	}
	l := w.log
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idleLeft = 0
	if !l.paused {
		return nil
	}
	if err := unix.FanotifyMark(w.fd, unix.FAN_MARK_ADD|unix.FAN_MARK_FILESYSTEM, changeMask, w.mountFD, ""); err != nil {
		err = fmt.Errorf("fanotify_mark: asking for changes again: %w", err)
		l.fixed = err.Error()
		l.distrustLocked(l.fixed)
		return err
	}
	l.paused = false
	return nil
}

// StopChanges stops recording changes for good (creations are still reported): no
// set of the watch is trusted from then on, for why.
func (w *CreateWatch) StopChanges(why string) error {
	if w.log == nil {
		return nil
	}
	l := w.log
	l.mu.Lock()
	l.fixed = why
	l.distrustLocked(why)
	l.mu.Unlock()
	return unix.FanotifyMark(w.fd, unix.FAN_MARK_REMOVE|unix.FAN_MARK_FILESYSTEM, changeMask|unix.FAN_OPEN, w.mountFD, "")
}

// countIdle counts one event read against IdleAfter's bound; true when the reader is
// to stop asking for changes now.
func (l *changeLog) countIdle() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.idleLeft == 0 || l.paused {
		return false
	}
	if l.idleLeft--; l.idleLeft > 0 {
		return false
	}
	l.paused = true
	l.distrustLocked(fmt.Sprintf("more than %d events on the workspace's file system while no command ran: changes were no longer recorded", l.idleOf))
	return true
}

// direntMask are the events that add or remove a name in a directory.
const direntMask = unix.FAN_CREATE | unix.FAN_DELETE | unix.FAN_MOVED_FROM | unix.FAN_MOVED_TO

// Bounds of a change log: past maxChangedPaths paths, or maxPathBytes of them, it no
// longer records (and is not to be trusted); its cache of directory paths is emptied
// past maxDirCache directories or maxDirBytes of their handles and paths; placing
// directories too deep for a path to name climbs through at most maxClimb parent
// directories in all, past which the log is not trusted either.
const (
	maxChangedPaths = 1 << 18
	maxPathBytes    = 16 << 20
	maxDirCache     = 1 << 16
	maxDirBytes     = 8 << 20
	maxObjects      = 1 << 16
	maxPending      = 1 << 12
	maxClimb        = 1 << 17
)

// Changes is what a watch made with WatchChanges recorded under its directory since
// it started.
type Changes struct {
	// Paths are slash-separated paths relative to the watched directory ("." for it)
	// that may have changed: with true, a name was made, removed or moved there, and
	// anything below it may have changed too; with false, the entry itself.
	Paths map[string]bool
	// Objects are files changed with no directory to name them (a hard link made or
	// removed elsewhere changes a file's link count): device and inode.
	Objects [][2]uint64
	// Untrusted, when set, says why the change set may miss changes (a queue
	// overflow, a read error, too many changes): a diff must then walk.
	Untrusted string
}

// changeLog records the changes a watch reports below its directory.
type changeLog struct {
	mountFD  int
	root     string // the watched directory, as /proc shows this process its descriptor
	maxPaths int
	// the watched directory's device and inode, and its mount's ID
	rootDev, rootIno uint64
	rootMnt          int

	// mu guards the fields below.
	mu        sync.Mutex
	dirs      map[string]string // directory handle → its path relative to root, or "\x00" outside
	objs      map[string]bool   // object handles resolved
	paths     map[string]bool
	pathBytes int // of the names in paths
	dirBytes  int // of the handles and paths in dirs
	climbed   int // parent directories climbed through, by climb
	objects   [][2]uint64
	pending   []rawEvent // whose handles could not be resolved yet
	untrusted string
	// fixed is why no change set of this watch can be trusted, ever (set as it
	// starts): TakeChanges starts a new set only when it is "".
	fixed string
	// idleLeft, when not zero, is how many more events the watch reads before it
	// stops asking for changes (IdleAfter); idleOf is what it was set to; paused
	// says it has stopped.
	idleLeft, idleOf int
	paused           bool
}

func newChangeLog(mountFD int, untrusted string, maxPaths int) (*changeLog, error) {
	root, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(mountFD))
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(mountFD, &st); err != nil {
		return nil, err
	}
	_, mnt, err := handleKey(mountFD)
	if err != nil && untrusted == "" {
		untrusted = fmt.Sprintf("the watched directory's handle: %v", err)
	}
	return &changeLog{mountFD: mountFD, root: root, untrusted: untrusted, fixed: untrusted, maxPaths: maxPaths,
		rootDev: st.Dev, rootIno: st.Ino, rootMnt: mnt,
		dirs: map[string]string{}, objs: map[string]bool{}, paths: map[string]bool{}}, nil
}

func (l *changeLog) distrust(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.distrustLocked(why)
}

func (l *changeLog) distrustLocked(why string) {
	if l.untrusted == "" {
		l.untrusted = why
	}
	l.paths, l.dirs, l.objs, l.objects, l.pending = nil, nil, nil, nil, nil // no longer needed
}

// Changes reads the watch's queue to its end and returns what it recorded so far:
// every change a process made before the call is in it (the kernel queues an event
// before the call that caused it returns). Without WatchChanges, Untrusted says so.
func (w *CreateWatch) Changes() Changes { return w.changes(false) }

// TakeChanges is Changes, after which the watch records a new set, from an empty one:
// what changes after the call is in the next set. A set no longer trusted (a queue
// overflow, too many paths) is so until it is taken: the next one is trusted again,
// unless the watch could never record (Changes' Untrusted says why each time). A
// session takes one set per command, and one for the time between two commands.
func (w *CreateWatch) TakeChanges() Changes { return w.changes(true) }

func (w *CreateWatch) changes(reset bool) Changes {
	if w.log == nil {
		return Changes{Untrusted: "the watch does not record changes"}
	}
	ack := make(chan struct{})
	select {
	case w.drain <- ack:
	case <-w.stop:
		return Changes{Untrusted: "the watch is closed"}
	}
	_, _ = unix.Write(w.wake[1], []byte{0})
	select {
	case <-ack:
	case <-w.stop:
		return Changes{Untrusted: "the watch is closed"}
	}
	l := w.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if reset {
		defer l.resetLocked()
	}
	if l.untrusted != "" {
		return Changes{Untrusted: l.untrusted}
	}
	pending := l.pending
	l.pending = nil
	for _, ev := range pending {
		if l.untrusted != "" {
			break
		}
		l.apply(ev, true)
	}
	if l.untrusted != "" {
		return Changes{Untrusted: l.untrusted}
	}
	c := Changes{Paths: make(map[string]bool, len(l.paths)), Objects: append([][2]uint64(nil), l.objects...)}
	for p, tree := range l.paths {
		c.Paths[p] = tree
	}
	return c
}

// resetLocked starts a new change set, trusted unless the watch never can be. The
// cache of directory paths goes too: a path cached is right only as long as the set
// it was cached in holds the moves that made it stale (dirPath).
func (l *changeLog) resetLocked() {
	l.untrusted = l.fixed
	if l.paused && l.untrusted == "" {
		l.untrusted = "changes are not being recorded (IdleAfter, no Busy since)"
	}
	if l.untrusted != "" {
		return
	}
	l.paths, l.pathBytes, l.objs, l.objects, l.pending = map[string]bool{}, 0, map[string]bool{}, nil, nil
	l.dirs, l.dirBytes, l.climbed = map[string]string{}, 0, 0
}

// event records one event: its mask and its information records.
func (l *changeLog) event(mask uint64, info []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.untrusted != "" {
		return
	}
	if mask&unix.FAN_Q_OVERFLOW != 0 {
		l.distrustLocked("the fanotify queue overflowed")
		return
	}
	var dir, obj []byte
	name, haveName := "", false
	for len(info) >= 4 {
		typ, size := info[0], int(binary.NativeEndian.Uint16(info[2:4]))
		if size < 4 || size > len(info) {
			l.distrustLocked("a malformed fanotify record")
			return
		}
		rec := info[4:size]
		info = info[size:]
		switch typ {
		case unix.FAN_EVENT_INFO_TYPE_DFID_NAME, unix.FAN_EVENT_INFO_TYPE_DFID:
			fh, rest, ok := handleOf(rec)
			if !ok {
				l.distrustLocked("a malformed fanotify handle")
				return
			}
			dir = fh
			if typ == unix.FAN_EVENT_INFO_TYPE_DFID_NAME {
				name, haveName = nulTerminated(rest), true
			}
		case unix.FAN_EVENT_INFO_TYPE_FID:
			fh, _, ok := handleOf(rec)
			if !ok {
				l.distrustLocked("a malformed fanotify handle")
				return
			}
			obj = fh
		}
	}
	l.apply(rawEvent{mask: mask, dir: dir, obj: obj, name: name, haveName: haveName}, false)
}

// rawEvent is one event's mask and records, as apply takes them.
type rawEvent struct {
	mask     uint64
	dir, obj []byte // handles of its directory and of its object; nil when absent
	name     string
	haveName bool
}

// apply records ev. A handle that cannot be resolved now (the kernel can fail one,
// with ENOMEM, while the file or directory is being deleted) is tried again when the
// change set is taken (final): failing then, the set is distrusted.
func (l *changeLog) apply(ev rawEvent, final bool) {
	switch {
	case ev.mask&^(unix.FAN_OPEN|unix.FAN_ONDIR) == 0 && ev.mask&unix.FAN_ONDIR != 0:
		// A directory opened (listed): it changes nothing.
	case ev.dir != nil:
		rel, err := l.dirPath(ev.dir)
		var untrusted untrustedError
		if errors.As(err, &untrusted) {
			l.distrustLocked(string(untrusted))
			return
		}
		if err != nil {
			l.later(ev, final, err)
			return
		}
		if rel == "" {
			// Outside the watched directory: a change of a workspace file through
			// a name there is of a file with other links, which the diff
			// re-examines (or whose link count change is an object event).
			return
		}
		if !ev.haveName || ev.name == "." || ev.name == "" {
			l.add(rel, false)
			return
		}
		child := ev.name
		if rel != "." {
			child = rel + "/" + ev.name
		}
		if ev.mask&direntMask != 0 {
			l.add(rel, false)
			l.add(child, true)
		} else {
			l.add(child, false)
		}
	case ev.obj != nil:
		if l.objs[string(ev.obj)] {
			return
		}
		id, gone, err := l.resolve(ev.obj)
		if err != nil {
			l.later(ev, final, err)
			return
		}
		if len(l.objs) >= maxObjects {
			l.distrustLocked(fmt.Sprintf("more than %d files changed with no directory", maxObjects))
			return
		}
		l.objs[string(ev.obj)] = true
		if !gone {
			l.objects = append(l.objects, id)
		}
	default:
		l.distrustLocked("a fanotify event with no file handle")
	}
}

// later keeps ev, whose handle could not be resolved (err), for the end; at the end,
// or past maxPending, the set is distrusted.
func (l *changeLog) later(ev rawEvent, final bool, err error) {
	if final || len(l.pending) >= maxPending {
		l.distrustLocked(fmt.Sprintf("event %#x: %v", ev.mask, err))
		return
	}
	ev.dir, ev.obj = bytes.Clone(ev.dir), bytes.Clone(ev.obj) // they point into the read buffer
	l.pending = append(l.pending, ev)
}

func (l *changeLog) add(rel string, tree bool) {
	old, ok := l.paths[rel]
	if ok && (old || !tree) {
		return
	}
	if !ok {
		if len(l.paths) >= l.maxPaths || l.pathBytes+len(rel) > maxPathBytes {
			l.distrustLocked(fmt.Sprintf("more than %d paths (or %d MiB of them) changed", l.maxPaths, maxPathBytes>>20))
			return
		}
		l.pathBytes += len(rel)
	}
	l.paths[rel] = tree
}

// dirPath is the path, relative to the watched directory, of the directory whose
// handle is fh; "" when it is outside it or gone. A directory's path is resolved once:
// if it moves later, the move is an event of its old and new parents, which makes
// both whole trees dirty (so a stale path only adds paths to read, and a directory
// remembered outside that has moved in since lies below a tree made dirty). An
// untrustedError says the set can no longer be trusted, whatever a retry would find.
func (l *changeLog) dirPath(fh []byte) (string, error) {
	if rel, ok := l.dirs[string(fh)]; ok {
		return strings.TrimPrefix(rel, "\x00"), nil
	}
	rel, err := l.resolveDir(fh)
	if err != nil {
		return "", err
	}
	l.remember(fh, rel)
	return rel, nil
}

// remember caches rel ("" outside) as the path of the directory whose handle is fh;
// the cache is emptied first past maxDirCache directories or maxDirBytes of handles
// and paths.
func (l *changeLog) remember(fh []byte, rel string) {
	if len(l.dirs) >= maxDirCache || l.dirBytes+len(fh)+len(rel) > maxDirBytes {
		clear(l.dirs)
		l.dirBytes = 0
	}
	l.dirBytes += len(fh) + len(rel)
	if rel == "" {
		rel = "\x00"
	}
	l.dirs[string(fh)] = rel
}

// untrustedError is a failure to place an event that no retry would mend: the change
// set is not trusted from then on.
type untrustedError string

func (e untrustedError) Error() string { return string(e) }

func (l *changeLog) resolveDir(fh []byte) (string, error) {
	typ := int32(binary.NativeEndian.Uint32(fh[4:8]))
	fd, err := unix.OpenByHandleAt(l.mountFD, unix.NewFileHandle(typ, fh[8:]), unix.O_PATH|unix.O_CLOEXEC)
	if errors.Is(err, unix.ESTALE) || errors.Is(err, unix.ENOENT) {
		return "", nil // gone: removing it (or its parent) was an event
	}
	if err != nil {
		return "", fmt.Errorf("resolving a directory's handle: %w", err)
	}
	defer unix.Close(fd)
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if errors.Is(err, unix.ENAMETOOLONG) {
		// Deeper than a path can name (another program's directories, on the
		// same file system): ignored unless it lies inside the watched one.
		inside, err := l.climb(fd)
		if err != nil {
			return "", err
		}
		if inside {
			return "", untrustedError("a directory inside the workspace has a path too long to name")
		}
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("resolving a directory's handle: %w", err)
	}
	switch {
	case p == l.root:
		return ".", nil
	case l.root == "/" && filepath.IsAbs(p):
		return p[1:], nil
	case strings.HasPrefix(p, l.root+"/"):
		return p[len(l.root)+1:], nil
	}
	return "", l.rootInPlace()
}

// rootInPlace fails, untrusted, unless the watched directory is still where its path
// says: a directory is placed by its path, and while the watched one (or a directory
// above it) is moved away, what lies below it has paths outside root: its changes
// would be dropped as outside, with no event to say so (the moves are of names outside
// the watched directory). Asked once a path was found outside root.
func (l *changeLog) rootInPlace() error {
	now, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(l.mountFD))
	if err != nil || now != l.root {
		return untrustedError("the watched directory was moved")
	}
	return nil
}

// climb reports whether the directory fd, too deep for a path to name, lies below the
// watched one: its ancestors are looked at one by one, up to the top of the watched
// directory's mount (whose root is its file system's: ReportsChanges), or up to one
// already placed. Each one passed on the way is remembered outside when the answer
// is outside, so that a directory is climbed through once while the cache holds it;
// and a change log climbs through at most maxClimb directories in all, past which it
// is not trusted. A cost per event and in all, whatever the shape of the tree.
func (l *changeLog) climb(fd int) (bool, error) {
	var passed [][]byte
	cur := fd
	defer func() {
		if cur != fd {
			unix.Close(cur)
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(cur, &st); err != nil {
		return false, err
	}
	for {
		if st.Dev == l.rootDev && st.Ino == l.rootIno {
			return true, nil
		}
		if l.climbed >= maxClimb {
			return false, untrustedError(fmt.Sprintf("more than %d parent directories climbed to place directories too deep to name", maxClimb))
		}
		l.climbed++
		up, err := unix.Openat(cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return false, err
		}
		if cur != fd {
			unix.Close(cur)
		}
		cur = up
		var ust unix.Stat_t
		if err := unix.Fstat(cur, &ust); err != nil {
			return false, err
		}
		if ust.Dev == st.Dev && ust.Ino == st.Ino {
			break // the top of the mount
		}
		st = ust
		key, mnt, err := handleKey(cur)
		if err != nil {
			return false, fmt.Errorf("a directory's handle: %w", err)
		}
		if mnt != l.rootMnt {
			break // past the top of the watched directory's mount
		}
		if rel, ok := l.dirs[string(key)]; ok {
			if rel != "\x00" {
				return true, nil
			}
			break
		}
		passed = append(passed, key)
	}
	for _, key := range passed {
		l.remember(key, "")
	}
	return false, nil
}

// handleKey is the handle of the file fd, laid out as a fanotify record holds it
// (its 8-byte header, then its bytes), and the mount fd is on.
func handleKey(fd int) ([]byte, int, error) {
	h, mnt, err := unix.NameToHandleAt(fd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return nil, 0, err
	}
	b := h.Bytes()
	key := make([]byte, 8, 8+len(b))
	binary.NativeEndian.PutUint32(key[0:4], uint32(len(b)))
	binary.NativeEndian.PutUint32(key[4:8], uint32(h.Type()))
	return append(key, b...), mnt, nil
}

// resolve is the device and inode of the object whose handle is fh; gone when it no
// longer exists, or has no name left. A file being evicted as it is resolved (its last link removed,
// anywhere on the file system) can fail otherwise once: it is tried again.
func (l *changeLog) resolve(fh []byte) (id [2]uint64, gone bool, err error) {
	for range 3 {
		if id, gone, err = l.resolveOnce(fh); err == nil {
			break
		}
	}
	return id, gone, err
}

func (l *changeLog) resolveOnce(fh []byte) (id [2]uint64, gone bool, err error) {
	typ := int32(binary.NativeEndian.Uint32(fh[4:8]))
	fd, err := unix.OpenByHandleAt(l.mountFD, unix.NewFileHandle(typ, fh[8:]), unix.O_PATH|unix.O_CLOEXEC)
	if errors.Is(err, unix.ESTALE) || errors.Is(err, unix.ENOENT) {
		return id, true, nil
	}
	if err != nil {
		return id, false, fmt.Errorf("resolving a file's handle: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return id, false, fmt.Errorf("resolving a file's handle: %w", err)
	}
	if st.Nlink == 0 {
		// Open, and named nowhere (an O_TMPFILE, or a file unlinked while open): it
		// is in no directory of the workspace. Had it a name there, that name's
		// removal is a change of its directory; should it get one, so is that.
		return id, true, nil
	}
	return [2]uint64{st.Dev, st.Ino}, false, nil
}

// handleOf splits a FID record's body (fsid, then struct file_handle) into the
// handle (its 8-byte header included) and what follows it.
func handleOf(rec []byte) (fh, rest []byte, ok bool) {
	const fsid = 8
	if len(rec) < fsid+8 {
		return nil, nil, false
	}
	h := rec[fsid:]
	size := int(binary.NativeEndian.Uint32(h[0:4]))
	if size < 0 || 8+size > len(h) {
		return nil, nil, false
	}
	return h[:8+size], h[8+size:], true
}

func nulTerminated(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// changeReporting names the file systems known to report every change of their
// files to fanotify (local ones: no remote writer, no lower layer changed beneath).
var changeReporting = map[uint32]string{
	uint32(unix.EXT4_SUPER_MAGIC): "ext4", uint32(unix.XFS_SUPER_MAGIC): "xfs",
	uint32(unix.BTRFS_SUPER_MAGIC): "btrfs", uint32(unix.TMPFS_MAGIC): "tmpfs",
}

// ReportsChanges says why a WatchChanges watch of dir may not see, or place, every
// change of the files below it, or "": its file system is not one known to report
// them all (overlay, NFS, FUSE, 9p, virtiofs…); a mount lies below dir (whose
// changes are another file system's, or the same one's seen under another path); or
// dir's mount shows only part of its file system (a handle of a file linked out of
// that part may not resolve through it).
func ReportsChanges(dir string) string {
	t, err := FilesystemType(dir)
	if err != nil {
		return err.Error()
	}
	if changeReporting[t] == "" {
		return fmt.Sprintf("the workspace's file system (type %#x) is not one known to report every change", t)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err.Error()
	}
	id, err := MountID(real)
	if err != nil {
		return fmt.Sprintf("the workspace's mount: %v", err)
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err.Error()
	}
	for _, m := range ParseMountinfo(string(data)) {
		switch {
		case m.ID == id && m.Root != "/":
			return fmt.Sprintf("the workspace's mount shows only %s of its file system", m.Root)
		case strings.HasPrefix(m.Point, real+"/"):
			return fmt.Sprintf("a mount inside the workspace (%s)", m.Point)
		}
	}
	return ""
}
