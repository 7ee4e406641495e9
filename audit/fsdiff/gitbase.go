package fsdiff

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cordonhq/cordon/internal/gitread"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/safefs"
)

// The baseline of a git workspace does not read the files git already has: a regular
// file whose stat data match its entry in .git/index (and are not racy) has the
// content of the blob the entry names. That blob is read from the object store only
// if a later snapshot finds the file changed (or gone), so a baseline costs a stat
// walk and one read of the index, and a diff costs what changed.
//
// The index is read once, before the command runs, and kept in memory: what the
// command writes to .git afterwards changes nothing. Blobs are read after the command,
// but an object is named by its content and is checked against its id, so the command
// can at worst make one unavailable (the change is then reported without its old
// content, and with a problem), never substitute another.
//
// The index is trusted only when no sandbox could have written it. An index that lies
// names content a file never had, with the file's stat data; then a later command's
// change is shown against the claimed content, so a file changed to what the index
// claims looks untouched, or renamed, or only chmodded (red team). Stat data include
// the inode and ctime, which no one can choose, so only a process on this host that
// can write .git can forge a matching entry: a copied or unpacked repository cannot.
// The one such process cordon starts is a sandbox under filesystem.git: commit, and
// before it starts the runner creates paths.GitWritten in .git (read-only inside);
// an index beside that file is never used. As a second line, a file the command
// rewrote with exactly the claimed content is reported as rewritten
// ([pending.rewritten]).

// lazyBlob is the content of a file the baseline did not read.
type lazyBlob struct {
	oid  plumbing.Hash
	once sync.Once
	full *entry // the entry with its content, once read
	err  error
}

// gitIndex reads the index of the workspace dir, opened as root, or returns nil when
// there is none usable: no .git directory (a link, a gitdir: file, a worktree), or an
// index that is missing, malformed or over the parser's limits. The caller then reads
// every file, as without git.
func gitIndex(ctx context.Context, root *os.Root, dir string) *gitread.Index {
	fi, err := root.Lstat(".git")
	if err != nil || !fi.IsDir() {
		return nil
	}
	g, err := safefs.OpenDir(dir, ".git")
	if err != nil {
		return nil
	}
	defer g.Close()
	if got, err := g.Lstat("."); err != nil || !os.SameFile(got, fi) {
		return nil
	}
	if _, err := g.Lstat(paths.GitWritten); !errors.Is(err, fs.ErrNotExist) {
		return nil // a sandbox could write this index (or we cannot tell): never trusted
	}
	idx, err := gitread.ReadIndex(ctx, g)
	if err != nil {
		return nil
	}
	return idx
}

// fromIndex returns a lazy entry for the regular file rel when the index vouches for
// it: its stat data match the index entry, it is not racy (modified at or after the
// index was written, or too close to this snapshot), and its blob is small enough to
// be read whole ([gitread.MaxObject]). Otherwise it returns nil and the file is read.
func (s *scanner) fromIndex(rel string, fi fs.FileInfo, key statKey, racy bool) *entry {
	if s.index == nil || racy || fi.Size() > gitread.MaxObject {
		return nil
	}
	ie, ok := s.index.Entries[rel]
	if !ok || !key.matchesIndex(ie) || fi.ModTime().UnixNano() >= s.index.ModTime.UnixNano() {
		return nil
	}
	l := &lazyEntry{entry: entry{key: key, mode: unixMode(fi.Mode()), size: fi.Size()}, blob: lazyBlob{oid: ie.OID}}
	l.entry.blob = &l.blob
	return &l.entry
}

// lazyEntry is a lazy entry and its blob in one allocation: a baseline makes one per
// tracked file.
type lazyEntry struct {
	entry
	blob lazyBlob
}

// resolver reads the blobs of lazy entries for one comparison. Not safe for
// concurrent use; the lazy entries themselves are (they are shared by snapshots).
type resolver struct {
	dir     string
	maxText int64 // Options.MaxTextSize
	// maxRetained and retained bound the content loaded from blobs for one comparison,
	// as Options.MaxRetained bounds a scan's: beyond it a blob is kept as size and
	// SHA-256 only (Large), as the file would have been had the baseline read it.
	maxRetained, retained int64
	// opts and hashLeft bound the blobs read as the diff's scan bounds the files it
	// hashes: what is left of Options.MaxHashBytes once the scan hashed its files,
	// Options.MaxFileHash per blob, and the deadline. A blob past them is not read:
	// the change is reported by the stat data, as a file not hashed is.
	opts     Options
	hashLeft int64
	store    *gitread.Store
	storeErr error
	opened   bool
	problems []string
}

func (r *resolver) close() {
	if r.store != nil {
		r.store.Close()
	}
}

// full returns e with its content: e itself unless it is lazy.
func (r *resolver) full(rel string, e *entry) *entry {
	if e == nil || e.blob == nil {
		return e
	}
	b := e.blob
	b.once.Do(func() { b.full, b.err = r.load(e) })
	if b.err != nil {
		r.problems = append(r.problems, fmt.Sprintf("%s: content before the command unavailable: %v", rel, b.err))
	}
	return b.full
}

// hashable reserves size bytes of the diff's hashing for a blob, or says why it is not
// read.
func (r *resolver) hashable(size int64) (why string) {
	switch {
	case r.opts.late():
		return unhashedDeadline
	case size > r.opts.MaxFileHash:
		return unhashedFile
	case size > r.hashLeft:
		return unhashedBudget
	}
	r.hashLeft -= size
	return ""
}

// load reads e's blob and builds the entry the baseline would have built by reading
// the file (the same digest, kind and retained content); on failure, an unreadable
// entry.
func (r *resolver) load(e *entry) (*entry, error) {
	full := &entry{key: e.key, mode: e.mode, size: e.size, xattrs: e.xattrs}
	if why := r.hashable(e.size); why != "" {
		unhashedEntry(full, why)
		return full, nil
	}
	if !r.opened {
		r.opened = true
		r.store, r.storeErr = gitread.OpenStore(filepath.Join(r.dir, ".git"))
	}
	err := r.storeErr
	var data []byte
	if err == nil {
		data, err = r.store.ReadBlob(e.blob.oid, e.size)
	}
	if err != nil {
		full.kind = Unreadable
		return full, err
	}
	full.sum, full.hasSum = sha256.Sum256(data), true
	if int64(len(data)) > r.maxText {
		full.kind = Large
		return full, nil
	}
	if bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0 {
		full.kind = Binary
		return full, nil
	}
	if r.retained+int64(len(data)) > r.maxRetained {
		full.kind = Large // over the memory budget: the patch says so
		return full, nil
	}
	r.retained += int64(len(data))
	full.content, full.retained = data, true
	return full, nil
}
