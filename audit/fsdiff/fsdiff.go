// Package fsdiff computes what a command changed in a workspace, as a list of changes and
// a unified diff, in pure Go.
//
// A [Tracker] takes a baseline snapshot of a directory tree and, after each command,
// a new snapshot that it compares with the previous one ([Tracker.Diff]); the new snapshot
// then becomes the baseline for the next command.
//
// Safety: fsdiff never runs anything (no git, no filter drivers, no hooks), never opens an
// entry named ".git" at any depth (directory or file; a nested one is reported as a
// special entry, so that a planted repository shows in the diff), never follows a symbolic link (a
// link is recorded with its target as content) and never opens anything but regular
// files, with O_NONBLOCK, so a FIFO planted in the workspace cannot block it. Every open
// is of one name relative to its directory's descriptor, never through a symbolic link
// (raw descriptors on Linux, an [os.Root] elsewhere: dirHandle), so a directory swapped
// for a link during a snapshot cannot lead the reader outside the workspace.
//
// Cost: a snapshot stats every entry (in parallel) but reads only the files whose stat key
// (size, mtime, ctime, inode, device, mode) changed since the previous snapshot, or whose
// timestamps were too recent to be trusted (the "racy git" problem). Text files up to
// [Options.MaxTextSize] keep their content in memory, within [Options.MaxRetained] bytes in
// total, so the next diff has the old side; larger or binary files keep only a SHA-256.
// In a git workspace the baseline does not read the tracked files whose stat data
// match the git index: their old side is the index's blob, read (and checked against
// its id) only if the file changed; see gitbase.go for what a lying index can and
// cannot do.
//
// This package is unstable until v1.
package fsdiff

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Defaults for [Options] fields left at zero.
const (
	DefaultMaxTextSize = 1 << 20   // 1 MiB
	DefaultMaxRetained = 256 << 20 // 256 MiB
)

// Options tunes a [Tracker]. The zero value is valid: every zero field means its default.
type Options struct {
	// MaxTextSize is the largest file whose content is kept for diffing (default 1 MiB).
	// Larger files are tracked by size and SHA-256 only.
	MaxTextSize int64
	// MaxRetained bounds the total bytes of file content kept in memory (default
	// 256 MiB). Text files beyond the budget are tracked by SHA-256 only, and a change to
	// one is reported without a patch.
	MaxRetained int64
	// Workers is the number of directories scanned at once (default 4×GOMAXPROCS, at
	// least 4: most of the time is spent waiting in system calls).
	Workers int
	// Hurry, when not nil, makes a baseline ([New]) scan one directory at a time
	// until it is closed, then Workers at once: a baseline that nothing waits for yet
	// (a command that runs behind a barrier and has not touched a file) leaves the
	// machine's cores to the command's start. Nil: Workers from the start. Only the
	// baseline paces itself; the tracker's later scans run at full speed.
	Hurry <-chan struct{}
	// Exclude lists slash-separated paths relative to the workspace root that are not
	// scanned (for example a cache directory). ".git" is always excluded, at any depth,
	// except as GitDir says.
	Exclude []string
	// GitDir scans the workspace's own .git, all but its objects (which are named by
	// their content): refs, HEAD, the index, logs and anything else the sandbox wrote
	// there, for a contract under which it may write them (filesystem.git: commit).
	GitDir bool

	// Bounds on what one snapshot and diff may cost cordon, whatever the workspace
	// holds; past one the work stops and the Result's [Gap] says what was not done.
	// Zero means the default.
	//
	// MaxEntries bounds the entries (files, links, directories) one snapshot records
	// (default [DefaultMaxEntries]); past it the rest is counted, not recorded.
	MaxEntries int
	// MaxFileHash bounds the bytes hashed of one file (default [DefaultMaxFileHash]);
	// a larger file is tracked by its stat data only. Holes of a sparse file are
	// never read, but count.
	MaxFileHash int64
	// MaxHashBytes bounds the bytes hashed by one snapshot (default
	// [DefaultMaxHashBytes]); past it files are tracked by their stat data only.
	MaxHashBytes int64
	// MaxPatch bounds the bytes of patch one diff renders (default
	// [DefaultMaxPatch]); past it changes are listed without their patch.
	MaxPatch int
	// Timeout bounds the wall time of one snapshot and its diff (default
	// [DefaultTimeout]); past it directories are not scanned, files not hashed and
	// patches not rendered.
	Timeout time.Duration

	// deadline is when the snapshot or diff under way must stop (set by started).
	deadline time.Time
	// now is the clock used to detect racy timestamps; nil means time.Now.
	now func() time.Time
	// noGitIndex makes the baseline read every file, as if the workspace had no git
	// index (the golden tests compare both ways).
	noGitIndex bool
	// devAlias, when [0] is not zero, makes files whose device is devAlias[0] count
	// as on devAlias[1] (a staged run's overlay view shows the workspace's unchanged
	// files with their own inode numbers, on the overlay's device).
	devAlias [2]uint64
	// reread are the files every snapshot reads again whatever their stat data say
	// (Tracker.Reread).
	reread *rereadSet
}

// Reread names files whose content may have changed with no change of their stat
// data: a write through a shared mapping whose page was already dirty faults no
// more, so it moves no timestamp, and makes no event a watch sees. Paths are files,
// or with Deep everything below a directory; All is every file.
type Reread struct {
	Paths []ChangedPath
	All   bool
}

// rereadSet is a Reread as a scanner asks it.
type rereadSet struct {
	all         bool
	exact, deep map[string]bool
	paths       []ChangedPath
}

func (r *rereadSet) has(rel string) bool {
	return r != nil && (r.all || r.exact[rel] || r.deep[rel] || len(r.deep) > 0 && below(rel, r.deep))
}

// Reread makes every later snapshot of t, and of its forks, read again the files rr
// names whatever their stat data say (a diff from a watch's report reads them too),
// until the next call. A session sets it while a process of its sandbox may hold a
// file mapped across its snapshots.
func (t *Tracker) Reread(rr Reread) {
	if !rr.All && len(rr.Paths) == 0 {
		t.opts.reread = nil
		return
	}
	set := &rereadSet{all: rr.All, exact: map[string]bool{}, deep: map[string]bool{}, paths: slices.Clone(rr.Paths)}
	for _, p := range rr.Paths {
		if p.Deep {
			set.deep[p.Path] = true
		} else {
			set.exact[p.Path] = true
		}
	}
	t.opts.reread = set
}

func (o Options) withDefaults() Options {
	if o.MaxTextSize <= 0 {
		o.MaxTextSize = DefaultMaxTextSize
	}
	if o.MaxRetained <= 0 {
		o.MaxRetained = DefaultMaxRetained
	}
	if o.Workers <= 0 {
		o.Workers = max(4, 4*runtime.GOMAXPROCS(0))
	}
	if o.now == nil {
		o.now = time.Now
	}
	return o.boundDefaults()
}

// Validate reports every invalid field of o.
func (o Options) Validate() error {
	var errs []error
	for _, p := range o.Exclude {
		if p == "" || p == "." || !fs.ValidPath(p) {
			errs = append(errs, fmt.Errorf("exclude %q: not a clean relative slash path", p))
		}
	}
	return errors.Join(errs...)
}

// Tracker holds the current baseline snapshot of one workspace.
//
// A Tracker is not safe for concurrent use: the runner calls Diff once after each
// command, from one goroutine.
type Tracker struct {
	dir  string
	opts Options
	base *snapshot
	// root is the workspace directory's device and inode when the baseline was
	// taken (DiffWatched).
	root [2]uint64
}

// New takes the baseline snapshot of the directory dir. It stats every entry and reads
// every file except, in a git workspace, the tracked files the index vouches for.
func New(ctx context.Context, dir string, opts Options) (*Tracker, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("fsdiff options: %w", err)
	}
	opts = opts.withDefaults()
	abs, err := absDir(dir)
	if err != nil {
		return nil, err
	}
	t := &Tracker{dir: abs, opts: opts}
	if t.root, err = rootID(abs); err != nil {
		return nil, err
	}
	base, err := scan(ctx, abs, opts.started(), nil)
	if err != nil {
		return nil, err
	}
	t.base, t.opts.Hurry = base, nil
	return t, nil
}

func absDir(dir string) (string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("workspace %s: not a directory", dir)
	}
	return dir, nil
}

// Baseline describes the current baseline snapshot.
func (t *Tracker) Baseline() ScanStats { return t.base.stats }

// Diff snapshots the workspace again, returns what changed since the previous snapshot,
// and makes the new snapshot the baseline. On error the baseline is unchanged.
func (t *Tracker) Diff(ctx context.Context) (*Result, error) {
	opts := t.opts.started()
	next, err := scan(ctx, t.dir, opts, t.base)
	if err != nil {
		return nil, err
	}
	res := compare(t.dir, t.base, next, opts)
	t.base = next
	return res, nil
}

// DiffAt is Diff of another view of the same workspace: dir shows the workspace as a
// staged run left it (an overlay of its changes on the workspace, which stays
// untouched). Unchanged files, seen through the overlay with their own inode numbers,
// are not read again. On error the baseline is unchanged.
func (t *Tracker) DiffAt(ctx context.Context, dir string) (*Result, error) {
	opts := t.opts.started()
	view, err1 := os.Stat(dir)
	real, err2 := os.Stat(t.dir)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	opts.devAlias = [2]uint64{devOf(view), devOf(real)}
	next, err := scan(ctx, dir, opts, t.base)
	if err != nil {
		return nil, err
	}
	res := compare(t.dir, t.base, next, opts)
	t.base = next
	return res, nil
}

// Fork snapshots the workspace again, re-reading only what changed since t's
// baseline, makes that snapshot t's baseline and returns a new Tracker starting from it.
// A session forks its workspace tracker before each command: the command's baseline
// then costs a stat walk instead of reading every file. Snapshots are never modified
// once taken, so the returned Tracker may be used from another goroutine while Fork
// is called again on t (by one goroutine at a time).
//
// since is what changed between t's baseline and the new snapshot: in a session, what
// the workspace went through while no command of the session was being diffed (a
// background process of an earlier command, or the host).
func (t *Tracker) Fork(ctx context.Context) (fork *Tracker, since *Result, err error) {
	opts := t.opts.started()
	next, err := scan(ctx, t.dir, opts, t.base)
	if err != nil {
		return nil, nil, err
	}
	since = compare(t.dir, t.base, next, opts)
	t.base = next
	return t.fork(), since, nil
}

// ForkWatched is [Tracker.Fork] with the walk replaced by the paths w names, as
// [Tracker.DiffWatched] replaces Diff's: a session whose watch recorded every change
// since t's baseline forks at the cost of what changed. why says, as DiffWatched's,
// when w cannot stand for a walk; nothing is done then, and the caller calls Fork.
func (t *Tracker) ForkWatched(ctx context.Context, w Watched) (fork *Tracker, since *Result, why string, err error) {
	since, why, err = t.DiffWatched(ctx, w)
	if why != "" || err != nil {
		return nil, nil, why, err
	}
	return t.fork(), since, "", nil
}

// fork is a Tracker starting from t's baseline.
func (t *Tracker) fork() *Tracker {
	return &Tracker{dir: t.dir, opts: t.opts, base: t.base, root: t.root}
}

// Adopt makes o's baseline (after its Diff: the workspace as a command left it) t's,
// so that the next Fork re-reads only what changed since. Same calling rules as Fork.
func (t *Tracker) Adopt(o *Tracker) { t.base = o.base }

// Op is the kind of a [Change].
type Op int

// Ops. The zero value is invalid.
const (
	_ Op = iota
	Added
	Deleted
	Modified // content, mode or extended attributes changed
	Renamed  // same content under a new path (the mode may also have changed)
	Touched  // only the modification time changed (content, mode and attributes did not)
)

func (o Op) String() string {
	switch o {
	case Added:
		return "added"
	case Deleted:
		return "deleted"
	case Modified:
		return "modified"
	case Renamed:
		return "renamed"
	case Touched:
		return "touched"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Kind says how a file's content is represented in a [Change].
type Kind int

// Kinds. Text is the zero value.
const (
	Text       Kind = iota // content diffed line by line
	Binary                 // contains a NUL byte: size and SHA-256 only
	Large                  // larger than MaxTextSize or beyond MaxRetained: size and SHA-256 only
	Symlink                // a symbolic link; its target is its content
	Special                // FIFO, socket or device: never opened
	Unreadable             // could not be read (permissions, vanished): no content
	Dir                    // a directory: added or deleted empty, or its mode or attributes changed
)

func (k Kind) String() string {
	switch k {
	case Text:
		return "text"
	case Binary:
		return "binary"
	case Large:
		return "large"
	case Symlink:
		return "symlink"
	case Special:
		return "special"
	case Unreadable:
		return "unreadable"
	case Dir:
		return "dir"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Change is one changed path.
type Change struct {
	Op      Op
	Path    string // slash-separated, relative to the workspace (the new path for renames)
	OldPath string // for Renamed only
	Kind    Kind   // of the new side, or of the old side for Deleted
	// OldMode and NewMode are Unix st_mode values (file type and permission bits, for
	// example 0o100644); zero on the missing side.
	OldMode, NewMode uint32
	OldSize, NewSize int64
	// OldSHA256 and NewSHA256 are hex digests of the content ("" on the missing side or
	// when unreadable).
	OldSHA256, NewSHA256 string
	Added, Deleted       int // lines, for text changes
	// OldMtime and NewMtime are the modification times, set (both) when they differ
	// on a path present on both sides, but for a directory (whose mtime moves with
	// its entries).
	OldMtime, NewMtime time.Time
	// Xattrs are the extended attributes added, changed or removed: all of a new
	// path's, none of a deleted one's.
	Xattrs []XattrChange
}

// ScanStats describes one snapshot.
type ScanStats struct {
	Files    int           // regular files, symbolic links and special files
	Dirs     int           // directories scanned (each also an entry of the snapshot)
	Read     int           // files whose content was read (re-read) in this snapshot
	Bytes    int64         // bytes read
	Retained int64         // bytes of content kept in memory
	Duration time.Duration // wall time of the snapshot
	// Watched is set by [Tracker.DiffWatched]: only the paths a watch reported were
	// read. Walked is the caller's: why it walked when it wanted a watched diff.
	Watched bool
	Walked  string
	// Unread is the caller's too: the change set showed nothing changed, and the
	// result is empty without a snapshot read to its end; Files, Dirs, Read, Bytes
	// and Duration are then unknown (zero), not counted.
	Unread bool
}

// Result is what changed between two snapshots.
type Result struct {
	Changes []Change // sorted by Path
	// Patch is the unified diff of all changes, in the order of Changes, with git-style
	// headers ("diff --git", "new file mode", "rename from", …). Binary and large files
	// appear as a one-line notice, never with content.
	Patch      []byte
	Insertions int // total added lines
	Deletions  int // total deleted lines
	Scan       ScanStats
	// Problems lists entries that could not be scanned (unreadable, vanished mid-scan,
	// changed during the scan), one "path: reason" each.
	Problems []string
	// Gap says what the bounds of [Options] left out; zero when nothing was.
	Gap Gap
}

// excluded reports whether the workspace-relative path rel is skipped.
func excluded(rel string, exclude []string, gitDir bool) bool {
	if gitDir && (rel == ".git" || strings.HasPrefix(rel, ".git/")) {
		return rel == ".git/objects"
	}
	if path.Base(rel) == ".git" {
		return true
	}
	for _, e := range exclude {
		if rel == e || strings.HasPrefix(rel, e+"/") {
			return true
		}
	}
	return false
}
