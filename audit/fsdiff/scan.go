package fsdiff

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cordonhq/cordon/internal/gitread"
)

// racyWindow is how close to the start of a snapshot a timestamp may be before the
// stat key of its file can no longer be trusted. File timestamps come from the kernel's
// coarse clock (one tick, at most 10 ms), so a file written in the same tick as our read
// could be rewritten with the same size and the same timestamps. Such a file is marked
// racy and re-read by the next snapshot (git's "racy git" rule). 100 ms leaves room for
// the tick and for clock slew; it costs only a re-read of files changed just before.
const racyWindow = 100 * time.Millisecond

// binarySniff is how much of a file is searched for a NUL byte, as git does.
const binarySniff = 8000

// entry is what a snapshot knows about one file. Entries are immutable once built, so an
// unchanged file shares its entry (and retained content) between snapshots.
type entry struct {
	key      statKey
	mode     uint32 // Unix st_mode
	kind     Kind
	size     int64 // bytes hashed
	sum      [sha256.Size]byte
	hasSum   bool
	content  []byte // retained content; nil when not retained
	retained bool
	racy     bool // the stat key cannot be trusted: re-read next time
	// unhashed, when set, says why the content was not read: the file is tracked by
	// its stat key only (a change of it is a change of the file).
	unhashed string
	// blob, when set, means the content was not read: it is this git blob's, and
	// kind, sum and content are filled in only by resolving it (see gitbase.go).
	blob   *lazyBlob
	xattrs *xattrSet // nil when none (meta.go)
	empty  bool      // a directory (kind Dir) that lists no entry
	// linked marks a file with other hard links: it may change through a name outside
	// the workspace, which a watch of the workspace's names does not see (watched.go).
	linked bool
}

// snapshot is the state of a workspace at one point in time.
type snapshot struct {
	entries  map[string]*entry // by slash-separated relative path
	stats    ScanStats
	problems []string
	bounds   snapBounds
	hashed   int64 // bytes of hashing its scan reserved, of Options.MaxHashBytes
	listed   int64 // directories its scan listed (the others' listings were unchanged)
	// names holds the whole listing, sorted, of each directory the scan listed whole
	// (not an empty one): the next snapshot lists it again only if its stat key
	// changed (listing).
	names map[string][]string
	// suspect are the paths of the entries a diff from a watch's report reads again
	// whatever the report says (racy or linked: watched.go), and devices the devices
	// its entries are on (at least): kept so that such a diff costs what changed,
	// not a pass over every entry.
	suspect []string
	devices []uint64
}

// noteSuspects fills s.suspect and s.devices from its entries.
func (s *snapshot) noteSuspects() {
	for p, e := range s.entries {
		if e.racy || e.linked {
			s.suspect = append(s.suspect, p)
		}
		if d := e.key.fileID()[0]; !slices.Contains(s.devices, d) {
			s.devices = append(s.devices, d)
		}
	}
}

// dirHandle is one open directory of the workspace being scanned: a raw descriptor on
// Linux (dir_linux.go), an [os.Root] elsewhere (dir_other.go). Every call takes one
// name in that directory and never follows a symbolic link; sub and open fail on one.
type dirHandle interface {
	// names lists the directory without "." and "..": its keep smallest names,
	// sorted, and how many it holds (names.go).
	names(keep int) (names []string, total int, err error)
	lstat(name string) (fs.FileInfo, error) // of an entry
	stat() (fs.FileInfo, error)             // of the directory itself
	sub(name string) (dirHandle, error)     // a subdirectory
	open(name string) (*os.File, error)     // a file, for reading, without blocking
	readlink(name string) (string, error)   // a symbolic link's target
	// xattrNames lists the extended attributes of an entry itself ("." for the
	// directory), xattrValue reads one (at most 64 KiB, the kernel's bound).
	xattrNames(name string) ([]string, error)
	xattrValue(name, attr string) ([]byte, error)
	close()
}

// scanner takes one snapshot.
type scanner struct {
	root *os.Root  // the workspace, for the git index and nested repositories
	top  dirHandle // the workspace, for the walk
	opts Options
	prev map[string]*entry // nil for the baseline
	// prevNames are the previous snapshot's listings (snapshot.names); outNames
	// this one's, guarded by mu.
	prevNames, outNames map[string][]string
	index               *gitread.Index // the workspace's git index, for the baseline; or nil
	start               time.Time
	sem                 chan struct{} // limits directories scanned at once
	calm                chan struct{} // one directory at a time until opts.Hurry is closed
	wg                  sync.WaitGroup

	retained  atomic.Int64
	read      atomic.Int64
	preOpened atomic.Int64 // subdirectories opened by their parent, not yet scanned
	bytes     atomic.Int64
	dirs      atomic.Int64
	listed    atomic.Int64 // directories listed (not taken from the previous snapshot)
	bounds
	dirAt     atomic.Int64 // directory entries recorded (not counted as files)
	xattrKept atomic.Int64 // bytes of extended attribute names itemized (meta.go)

	// mu guards the fields below.
	mu       sync.Mutex
	out      map[string]*entry
	problems []string
}

// scan takes a snapshot of dir, re-reading only the entries of prev whose stat key
// changed.
func scan(ctx context.Context, dir string, opts Options, prev *snapshot) (*snapshot, error) {
	s, done, err := openScanner(dir, opts)
	if err != nil {
		return nil, err
	}
	defer done()
	if prev != nil {
		s.prev, s.prevNames = prev.entries, prev.names
		s.out = make(map[string]*entry, len(prev.entries))
	} else if !opts.noGitIndex {
		s.index = gitIndex(ctx, s.root, dir)
	}
	s.wg.Add(1)
	go s.scanDir(ctx, ".", nil, nil)
	s.wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scanning workspace: %w", err)
	}
	return s.snapshot(), nil
}

// openScanner opens the workspace dir for a snapshot; done closes it.
func openScanner(dir string, opts Options) (s *scanner, done func(), err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("opening workspace: %w", err)
	}
	top, err := openTop(dir)
	if err != nil {
		root.Close()
		return nil, nil, fmt.Errorf("opening workspace: %w", err)
	}
	if err := sameDir(root, top); err != nil {
		top.close()
		root.Close()
		return nil, nil, fmt.Errorf("opening workspace: %w", err)
	}
	s = &scanner{
		root:     root,
		top:      top,
		opts:     opts,
		start:    opts.now(),
		sem:      make(chan struct{}, opts.Workers),
		calm:     make(chan struct{}, 1),
		out:      make(map[string]*entry),
		outNames: make(map[string][]string),
	}
	return s, func() { top.close(); root.Close() }, nil
}

// snapshot is what s has scanned.
func (s *scanner) snapshot() *snapshot {
	snap := &snapshot{
		entries:  s.out,
		problems: s.problems,
		bounds:   s.snapBounds(),
		hashed:   s.hashed.Load(),
		listed:   s.listed.Load(),
		names:    s.outNames,
		stats: ScanStats{
			Files:    len(s.out) - int(s.dirAt.Load()),
			Dirs:     int(s.dirs.Load()),
			Read:     int(s.read.Load()),
			Bytes:    s.bytes.Load(),
			Retained: s.retained.Load(),
			Duration: time.Since(s.start),
		},
	}
	snap.noteSuspects()
	return snap
}

func (s *scanner) problem(rel string, err error) {
	s.mu.Lock()
	s.problems = append(s.problems, fmt.Sprintf("%s: %v", rel, err))
	s.mu.Unlock()
}

// scanDir lists the directory rel, starts a scan of each subdirectory and records its
// files. want is the directory's own lstat result as seen from its parent (nil for the
// root): the opened directory must be that same directory. pre, when not nil, is the
// directory already opened by its parent (scanDir closes it).
func (s *scanner) scanDir(ctx context.Context, rel string, want fs.FileInfo, pre dirHandle) {
	defer s.wg.Done()
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	defer s.pace()()
	if pre != nil {
		s.preOpened.Add(-1)
	}
	if ctx.Err() != nil || s.lateDir(rel) {
		if pre != nil {
			pre.close()
		}
		return
	}
	r, err := s.openDir(rel, want, pre)
	if err != nil {
		s.problem(rel, err)
		return
	}
	if r != s.top {
		defer r.close()
	}
	s.dirs.Add(1)
	names, total, err := s.listing(r, rel, want)
	if err != nil {
		s.problem(rel, err)
		return
	}
	if rel != "." {
		s.put(rel, s.dirEntry(r, rel, want, total == 0))
	}
	// The names as substrings of the paths made of them (outNames); not those of a
	// staged run's view, whose keys are aliased (listing).
	var listed []string
	if rel != "." && total == len(names) && total > 0 && s.opts.devAlias[0] == 0 {
		listed = make([]string, len(names))
	}
	local, stopped := s.look(ctx, r, rel, names, total, listed)
	if !stopped && total > len(names) {
		// The listing kept only what the entries bound could still record.
		s.unlisted.Add(int64(total - len(names)))
		s.markIncomplete(rel)
	}
	s.mu.Lock()
	if listed != nil && !stopped {
		s.outNames[rel] = listed
	}
	for _, ne := range local {
		s.out[ne.rel] = ne.e
	}
	s.mu.Unlock()
}

// pace waits, until opts.Hurry is closed, for the one directory being scanned to be
// done, and returns what ends this one's turn.
func (s *scanner) pace() (done func()) {
	if s.opts.Hurry == nil {
		return func() {}
	}
	select {
	case <-s.opts.Hurry:
		return func() {}
	default:
	}
	select {
	case <-s.opts.Hurry:
		return func() {}
	case s.calm <- struct{}{}:
		return func() { <-s.calm }
	}
}

// look looks at names, the listing of the directory rel (opened as r) that holds
// total: each subdirectory is scanned by a worker of its own, each other entry is
// returned in local, a nested repository fingerprinted (never descended into), and
// listed (when not nil) gets each name as a substring of its path. stopped says the
// entries bound ended it early.
func (s *scanner) look(ctx context.Context, r dirHandle, rel string, names []string, total int, listed []string) (local []namedEntry, stopped bool) {
	local = make([]namedEntry, 0, len(names))
	for i, name := range names {
		if !s.admit(rel, total-i, len(rel)+1+len(name)) {
			return local, true
		}
		crel := name
		if rel != "." {
			crel = rel + "/" + name
		}
		if listed != nil {
			listed[i] = crel[len(rel)+1:]
		}
		if name == ".git" && rel != "." && !strings.HasPrefix(crel, ".git/") {
			// A nested repository: shown (the host's git would obey its config and
			// hooks), never descended into; what git obeys is fingerprinted.
			if e := nestedRepo(s.root, crel, s.opts); e != nil {
				local = append(local, namedEntry{crel, e})
			}
			continue
		}
		if excluded(crel, s.opts.Exclude, s.opts.GitDir) {
			continue
		}
		fi, err := r.lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // vanished since the listing
		}
		if err != nil {
			s.problem(crel, err)
			continue
		}
		if fi.IsDir() {
			s.wg.Add(1)
			go s.scanDir(ctx, crel, fi, s.preOpen(r, name))
			continue
		}
		local = append(local, namedEntry{crel, s.fileEntry(r, name, crel, fi)})
	}
	return local, false
}

// listing lists the directory rel, opened as r, whose lstat from its parent is want:
// its names that the entries bound can still record, sorted, and how many it holds. A
// directory listed whole by the previous snapshot, whose stat key has not changed
// since and could be trusted then, is not listed again: adding, removing or renaming
// an entry moves a directory's mtime and ctime (the latter cannot be set from user
// space), and a change in the same clock tick as the previous snapshot made it racy.
// A staged run's view (devAlias) is always listed.
func (s *scanner) listing(r dirHandle, rel string, want fs.FileInfo) ([]string, int, error) {
	keep := s.canAdmit()
	if names := s.prevNames[rel]; names != nil && want != nil && s.opts.devAlias[0] == 0 {
		if p := s.prev[rel]; p != nil && p.kind == Dir && !p.racy && p.key == keyOf(want) {
			return names[:min(keep, len(names))], len(names), nil
		}
	}
	s.listed.Add(1)
	return r.names(keep)
}

type namedEntry struct {
	rel string
	e   *entry
}

// maxPreOpened bounds the subdirectories opened by their parent and not yet scanned
// (each holds a descriptor); beyond it a subdirectory is opened from the workspace
// root by its path, one open per path component.
const maxPreOpened = 256

// preOpen opens the subdirectory name of r for its scan, or returns nil when too many
// are open already or it cannot be opened (the scan then opens it by path and reports
// why it cannot).
func (s *scanner) preOpen(r dirHandle, name string) dirHandle {
	if s.preOpened.Add(1) > maxPreOpened {
		s.preOpened.Add(-1)
		return nil
	}
	child, err := r.sub(name)
	if err != nil {
		s.preOpened.Add(-1)
		return nil
	}
	return child
}

// openDir opens the directory rel inside the workspace root (or takes pre, opened by
// its parent) and checks that it is the directory its parent listed (not a symbolic
// link swapped in since).
func (s *scanner) openDir(rel string, want fs.FileInfo, pre dirHandle) (dirHandle, error) {
	if rel == "." {
		return s.top, nil
	}
	r, err := pre, error(nil)
	if r == nil {
		r, err = s.openPath(rel)
	}
	if err != nil {
		return nil, err
	}
	got, err := r.stat()
	if err == nil && !sameFile(got, want) {
		err = errors.New("directory replaced during scan")
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

// openPath opens the directory rel from the top of the workspace, one component at a
// time, following no link.
func (s *scanner) openPath(rel string) (dirHandle, error) {
	d := s.top
	for _, name := range strings.Split(rel, "/") {
		next, err := d.sub(name)
		if d != s.top {
			d.close()
		}
		if err != nil {
			return nil, err
		}
		d = next
	}
	return d, nil
}

// sameDir checks that the walk's top is the directory root opened.
func sameDir(root *os.Root, top dirHandle) error {
	a, err1 := root.Stat(".")
	b, err2 := top.stat()
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if !sameFile(a, b) {
		return errors.New("workspace replaced while opening it")
	}
	return nil
}

// dirEntry is the entry of the directory rel, opened as r, whose lstat from its
// parent is fi: its mode, its extended attributes (those of the previous snapshot
// when its stat key is unchanged) and whether it is empty. Its size and times move
// with its entries, so only its mode and attributes count as changes of its own.
func (s *scanner) dirEntry(r dirHandle, rel string, fi fs.FileInfo, empty bool) *entry {
	s.dirAt.Add(1)
	key := keyOf(fi).alias(s.opts.devAlias)
	e := &entry{key: key, mode: unixMode(fi.Mode()) | 0o040000, kind: Dir, empty: empty}
	if p := s.prev[rel]; p != nil && p.kind == Dir && p.key == key && !p.racy {
		e.xattrs = p.xattrs
	} else {
		e.xattrs = s.readXattrs(r, ".", rel)
		e.racy = key.recent(s.start.Add(-racyWindow).UnixNano())
	}
	return e
}

// fileEntry returns the entry for a non-directory: the previous one when its stat key is
// unchanged and trustworthy, else a fresh one.
func (s *scanner) fileEntry(r dirHandle, name, rel string, fi fs.FileInfo) *entry {
	key := keyOf(fi).alias(s.opts.devAlias)
	if p := s.prev[rel]; p != nil && p.key == key && !p.racy && !s.opts.reread.has(rel) {
		if p.retained {
			s.retained.Add(int64(len(p.content)))
		}
		return p
	}
	racy := key.recent(s.start.Add(-racyWindow).UnixNano())
	// Read whatever the content's source: a git baseline vouches for content, not
	// for attributes.
	xattrs := s.readXattrs(r, name, rel)
	if fi.Mode().IsRegular() {
		if lazy := s.fromIndex(rel, fi, key, racy); lazy != nil {
			lazy.xattrs, lazy.linked = xattrs, links(fi) > 1
			return lazy
		}
	}
	e := &entry{key: key, mode: unixMode(fi.Mode()), size: fi.Size(), racy: racy, xattrs: xattrs, linked: links(fi) > 1}
	switch fi.Mode().Type() {
	case 0:
		if why := s.hashable(fi.Size()); why != "" {
			unhashedEntry(e, why)
			break
		}
		s.readFile(r, name, rel, fi, e)
	case fs.ModeSymlink:
		target, err := r.readlink(name)
		if err != nil {
			s.unreadable(rel, e, err)
			break
		}
		e.kind = Symlink
		s.setContent(e, []byte(target))
	default:
		e.kind = Special
	}
	return e
}

func (s *scanner) unreadable(rel string, e *entry, err error) {
	s.problem(rel, err)
	e.kind = Unreadable
	e.racy = true // try again next time
}

// setContent records the digest of data, classifies it and keeps it when it is text
// within the budget, or a symbolic link target (tiny, and needed to show the change).
func (s *scanner) setContent(e *entry, data []byte) {
	n := int64(len(data))
	s.read.Add(1)
	s.bytes.Add(n)
	e.sum, e.hasSum, e.size = sha256.Sum256(data), true, n
	switch {
	case e.kind == Symlink:
		s.retained.Add(n)
	case bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0:
		e.kind = Binary
		return
	case s.retained.Add(n) > s.opts.MaxRetained:
		s.retained.Add(-n)
		e.kind = Large
		return
	}
	e.content, e.retained = data, true
}

// readFile reads a regular file: its content when it is small enough, else only its
// digest. The file is opened without following links and without blocking, and must
// still be the file that was listed.
func (s *scanner) readFile(r dirHandle, name, rel string, fi fs.FileInfo, e *entry) {
	f, err := r.open(name)
	if err != nil {
		s.unreadable(rel, e, err)
		return
	}
	defer f.Close()
	got, err := f.Stat()
	if err == nil && (!got.Mode().IsRegular() || !sameFile(got, fi)) {
		err = errors.New("file replaced during scan")
	}
	if err != nil {
		s.unreadable(rel, e, err)
		return
	}
	limit := s.opts.MaxTextSize
	data, err := readUpTo(f, min(fi.Size(), limit), limit+1)
	if err != nil {
		s.unreadable(rel, e, err)
		return
	}
	if int64(len(data)) <= limit {
		s.setContent(e, data)
		return
	}
	h := sha256.New()
	h.Write(data)
	n, err := hashFrom(f, h, int64(len(data)), fi.Size(), s.stopped)
	s.bytes.Add(n)
	if errors.Is(err, errStopped) {
		s.timedOut.Store(true)
		unhashedEntry(e, unhashedDeadline)
		return
	}
	if err != nil {
		s.unreadable(rel, e, err)
		return
	}
	s.read.Add(1)
	s.bytes.Add(int64(len(data)))
	e.kind, e.size, e.hasSum = Large, fi.Size(), true
	h.Sum(e.sum[:0])
}

// readUpTo reads at most limit bytes of f, allocating hint bytes up front.
func readUpTo(f io.Reader, hint, limit int64) ([]byte, error) {
	buf := make([]byte, 0, hint+1)
	for int64(len(buf)) < limit {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := min(int64(cap(buf)), limit)
		n, err := f.Read(buf[len(buf):room])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// unixMode converts m to a Unix st_mode (file type and permission bits).
func unixMode(m fs.FileMode) uint32 {
	u := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		u |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		u |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		u |= 0o1000
	}
	switch m.Type() {
	case 0:
		return u | 0o100000
	case fs.ModeSymlink:
		return 0o120000 // as git records it: link permissions mean nothing
	case fs.ModeNamedPipe:
		return u | 0o010000
	case fs.ModeSocket:
		return u | 0o140000
	case fs.ModeDevice | fs.ModeCharDevice:
		return u | 0o020000
	case fs.ModeDevice:
		return u | 0o060000
	}
	return u
}
