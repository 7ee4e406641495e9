package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// MaxRefusedListed bounds [Stats].RefusedPaths: past it, refusals are only counted.
const MaxRefusedListed = 64

// Sync makes the directory dir (reached without links, as named) equal to the tar
// archive r, as [Pack] writes one, for the paths writable reports true only (rel is
// a clean path below dir, never "."): it creates or replaces the directories, regular
// files and symbolic links that differ, and removes what the archive does not hold.
// A regular file of the same size, mode and content, a directory of the same mode and
// a link to the same target are left untouched (their times stay). Everything made is
// owned by dir's owner.
//
// The archive is hostile (a sandbox wrote the tree it was packed from) and checked as
// [Unpack] checks one, but an entry that would be refused, or that differs from dir
// where writable is false, is not an error: it is skipped and counted in
// Stats.Refused (the first [MaxRefusedListed] named in Stats.RefusedPaths), so a
// sandbox cannot end its caller's work by making a file. A path of dir that the
// archive lacks and writable refuses is kept and counted the same way. Hard links,
// which Pack never writes, are refused. Nothing is ever made or removed through a
// link, on either side.
//
// Errors are the stream's (ErrMalformed), lim's (ErrTooLarge), a full disk
// (ErrNoSpace) and the host's own: then what was synced so far stays, and nothing
// is removed (removals happen once the whole archive was read).
func Sync(r io.Reader, dir string, lim Limits, writable func(rel string) bool) (Stats, error) {
	got, err := SyncFrom(r, dir, lim, writable, false)
	return got.Stats, err
}

// SyncFrom is [Sync] of an archive [PackChanges] wrote. With changes true it may be
// a changes archive (its first entry says so): then a path it has no entry for is
// left as it is, and each path it says was removed is removed with everything below
// it, where writable allows (the archive's other removals never happen); with
// changes false such an archive is an error. A regular file with holes is written
// with its holes. Checks, bounds (a sparse file counts its whole size) and errors
// are Sync's.
func SyncFrom(r io.Reader, dir string, lim Limits, writable func(rel string) bool, changes bool) (got Synced, err error) {
	err = linux.WithoutReserve(func() (err error) {
		got, err = syncTree(r, dir, lim, writable, changes)
		return err
	})
	return got, err
}

func syncTree(r io.Reader, dir string, lim Limits, writable func(string) bool, changes bool) (Synced, error) {
	t, err := linux.OpenTree(dir)
	if err != nil {
		return Synced{}, err
	}
	defer t.Close()
	uid, gid, err := t.Owner()
	if err != nil {
		return Synced{}, err
	}
	s := &syncer{unpacker: unpacker{t: t, uid: uid, gid: gid, lim: lim}, writable: writable, seen: map[string]bool{".": true}}
	tr := tar.NewReader(r)
	for first := true; ; first = false {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s.result(), &EntryError{Entry: s.last, Reason: "after this entry: " + err.Error(), Err: ErrMalformed, Cause: err}
		}
		if first && hdr.Typeflag == tar.TypeXGlobalHeader && hdr.PAXRecords[recordPack] == "changes" {
			if !changes {
				return s.result(), &EntryError{Entry: hdr.Name, Reason: "an archive of changes where the whole tree was asked for", Err: ErrMalformed}
			}
			s.changes = true
			continue
		}
		s.last = hdr.Name
		if err := s.entry(hdr, tr); err != nil {
			return s.result(), err
		}
	}
	if s.changes {
		s.removals()
		return s.result(), nil
	}
	err = s.prune(".")
	return s.result(), err
}

// result is what the sync took so far.
func (s *syncer) result() Synced {
	names := make(map[string]bool, len(s.seen))
	for rel := range s.seen {
		if rel != "." {
			names[rel] = true
		}
	}
	return Synced{Stats: s.stats, Changes: s.changes, Names: names, Removed: s.gone}
}

// removals removes the paths a changes archive says were removed, where writable
// allows, but any it also has an entry for, and any below a path it has as other than
// a directory: that entry made the path over (removing what was below it) or was
// refused, and then what is below it stays, as it does in a whole archive's sync.
func (s *syncer) removals() {
	for _, rel := range s.gone {
		if _, held := s.seen[rel]; !held && !s.belowNonDir(rel) {
			s.removeAll(rel)
		}
	}
}

// belowNonDir reports whether a directory above rel is an entry of the archive's
// other than a directory.
func (s *syncer) belowNonDir(rel string) bool {
	for p := path.Dir(rel); p != "."; p = path.Dir(p) {
		if dir, ok := s.seen[p]; ok && !dir {
			return true
		}
	}
	return false
}

// info is what Sync compares of a path of dir's: its type and mode, its size.
type info struct {
	mode uint32
	size int64
}

type syncer struct {
	unpacker
	writable func(string) bool
	seen     map[string]bool // the archive's paths, true for its directories (bounded by lim.Entries)
	changes  bool            // a changes archive
	gone     []string        // a changes archive's removed paths (bounded by lim.Entries)
}

// refuse counts a path left as it is.
func (s *syncer) refuse(rel string) {
	s.stats.Refused++
	if len(s.stats.RefusedPaths) < MaxRefusedListed {
		s.stats.RefusedPaths = append(s.stats.RefusedPaths, rel)
	}
}

// entry syncs one entry of the archive.
func (s *syncer) entry(hdr *tar.Header, body io.Reader) error {
	name := hdr.Name
	rel, err := cleanPath(name)
	if err == nil && rel == "." {
		return nil
	}
	// Every entry counts against the limits, refused or not: a refused entry's body
	// is read past all the same.
	if err := s.count(name); err != nil {
		return err
	}
	if hdr.Size > s.lim.Bytes-s.stats.Bytes {
		return tooLarge(name, "%d bytes; the archive may hold %d in all", hdr.Size, s.lim.Bytes)
	}
	skip := func(p string) error {
		s.refuse(p)
		s.stats.Bytes += hdr.Size
		return nil
	}
	if err != nil {
		return skip(name)
	}
	if hdr.PAXRecords[recordRemoved] != "" {
		if s.changes && hdr.Typeflag == tar.TypeReg && hdr.Size == 0 {
			s.gone = append(s.gone, rel) // removed once the whole archive was read
			return nil
		}
		if _, twice := s.seen[rel]; !twice {
			s.seen[rel] = false // refused, and kept as it is
		}
		return skip(rel)
	}
	if _, twice := s.seen[rel]; twice {
		return skip(rel) // twice in one archive: the first stands
	}
	s.seen[rel] = hdr.Typeflag == tar.TypeDir
	if hdr.Mode&(syscall.S_ISUID|syscall.S_ISGID|syscall.S_ISVTX) != 0 || !s.sane(hdr, rel) {
		return skip(rel)
	}
	if rec, ok := hdr.PAXRecords[recordSparse]; ok {
		return s.sparse(hdr, rel, rec, body)
	}
	var cur *info
	st, err := s.t.Lstat(rel)
	switch {
	case err == nil:
		cur = &info{mode: st.Mode, size: st.Size}
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
	case errors.Is(err, syscall.ELOOP):
		return skip(rel) // below a link of dir's: nothing is made through it
	case err != nil:
		return s.failed(name, err)
	}
	same, err := s.same(hdr, rel, cur, body)
	if err != nil || same {
		return err
	}
	if !s.writable(rel) || !s.parentsDirs(rel) {
		return skip(rel)
	}
	if cur != nil && (cur.mode&syscall.S_IFMT == syscall.S_IFDIR) != (hdr.Typeflag == tar.TypeDir) {
		if !s.removeAll(rel) {
			return nil // what writable keeps there stays: so does the entry
		}
	}
	return s.write(hdr, rel, cur, body)
}

// write makes the entry hdr at rel (body: a file's content). cur is what was there
// (nil: nothing): a directory there is kept and given hdr's mode.
func (s *syncer) write(hdr *tar.Header, rel string, cur *info, body io.Reader) error {
	var err error
	perm := uint32(hdr.Mode & 0o777)
	switch hdr.Typeflag {
	case tar.TypeDir:
		if cur != nil && cur.mode&syscall.S_IFMT == syscall.S_IFDIR {
			err = s.t.Chmod(rel, perm)
		} else {
			err = s.t.Mkdir(rel, perm, s.uid, s.gid)
		}
	case tar.TypeReg:
		err = s.t.WriteFile(rel, &budget{r: body, left: s.lim.Bytes - s.stats.Bytes, n: &s.stats.Bytes}, perm, s.uid, s.gid)
		if errors.Is(err, errBudget) {
			return tooLarge(hdr.Name, "past %d bytes in all", s.lim.Bytes)
		}
	case tar.TypeSymlink:
		err = s.t.Symlink(rel, hdr.Linkname, s.uid, s.gid)
	}
	return s.wrote(hdr.Name, rel, err)
}

// sane reports whether hdr is an entry Unpack would make at rel: a directory, a
// regular file, or a symbolic link that stays inside.
func (s *syncer) sane(hdr *tar.Header, rel string) bool {
	switch hdr.Typeflag {
	case tar.TypeDir, tar.TypeReg:
		return true
	case tar.TypeSymlink:
		return len(hdr.Linkname) <= MaxPath && linkStaysInside(rel, hdr.Linkname)
	}
	return false
}

// parentsDirs reports whether every directory above rel is a directory of dir's
// (Pack lists a directory before what it holds; an archive that does not, or a
// directory writable kept as something else, leaves nothing to make rel in).
func (s *syncer) parentsDirs(rel string) bool {
	d := path.Dir(rel)
	if d == "." {
		return true
	}
	st, err := s.t.Lstat(d)
	return err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR
}

// same reports whether rel already is what hdr describes (cur: its lstat, nil when
// missing). A regular file's body is compared as it is read; when it differs part
// way, what was read is given back ahead of the rest (s.pending) for the write.
func (s *syncer) same(hdr *tar.Header, rel string, cur *info, body io.Reader) (bool, error) {
	if cur == nil {
		return false, nil
	}
	perm := uint32(hdr.Mode & 0o777)
	switch hdr.Typeflag {
	case tar.TypeDir:
		return cur.mode&syscall.S_IFMT == syscall.S_IFDIR && cur.mode&0o7777 == perm, nil
	case tar.TypeSymlink:
		if cur.mode&syscall.S_IFMT != syscall.S_IFLNK {
			return false, nil
		}
		to, err := s.t.Readlink(rel)
		return err == nil && to == hdr.Linkname, nil
	}
	if cur.mode&syscall.S_IFMT != syscall.S_IFREG || cur.mode&0o7777 != perm || cur.size != hdr.Size {
		return false, nil
	}
	f, err := s.t.Open(rel)
	if err != nil {
		return false, nil // replaced since: written anew
	}
	defer f.Close()
	n, chunk, equal, err := sameContent(f, &budget{r: body, left: s.lim.Bytes - s.stats.Bytes, n: &s.stats.Bytes})
	if errors.Is(err, errBudget) {
		return false, tooLarge(hdr.Name, "past %d bytes in all", s.lim.Bytes)
	}
	if err != nil {
		return false, &EntryError{Entry: hdr.Name, Reason: err.Error(), Err: ErrMalformed, Cause: err}
	}
	if equal {
		return true, nil
	}
	// The first n bytes matched: the new file is dir's copy of them, the chunk that
	// differed, then the rest of the body.
	s.stats.Bytes -= n + int64(len(chunk)) // counted again as the write reads them
	if err := s.rewind(hdr, io.MultiReader(io.NewSectionReader(f, 0, n), bytes.NewReader(chunk), body)); err != nil {
		return false, err
	}
	return true, nil
}

// rewind writes the regular file rel anew from r, the entry's whole body.
func (s *syncer) rewind(hdr *tar.Header, r io.Reader) error {
	rel, _ := cleanPath(hdr.Name)
	if !s.writable(rel) {
		s.refuse(rel)
		return nil
	}
	err := s.t.WriteFile(rel, &budget{r: r, left: s.lim.Bytes - s.stats.Bytes, n: &s.stats.Bytes}, uint32(hdr.Mode&0o777), s.uid, s.gid)
	if errors.Is(err, errBudget) {
		return tooLarge(hdr.Name, "past %d bytes in all", s.lim.Bytes)
	}
	return s.wrote(hdr.Name, rel, err)
}

// wrote counts the outcome of making rel (the entry name): a change, or a refusal
// (one the archive caused, as failed tells), or returns the host's own error.
func (s *syncer) wrote(name, rel string, err error) error {
	if err != nil {
		if err = s.failed(name, err); errors.Is(err, ErrRefused) {
			s.refuse(rel)
			return nil
		}
		return err
	}
	s.stats.Changed++
	return nil
}

// sameContent compares f with body chunk by chunk. It returns how many bytes matched
// before the first chunk that differs, that chunk (read from body: the caller gives
// it back), and whether everything matched to body's end.
func sameContent(f io.Reader, body io.Reader) (int64, []byte, bool, error) {
	a, b := make([]byte, 32<<10), make([]byte, 32<<10)
	var n int64
	for {
		k, err := fill(body, b)
		if k > 0 {
			if _, ferr := io.ReadFull(f, a[:k]); ferr != nil || !bytes.Equal(a[:k], b[:k]) {
				return n, b[:k], false, nil
			}
			n += int64(k)
		}
		if err == io.EOF {
			return n, nil, true, nil
		}
		if err != nil {
			return n, nil, false, err
		}
	}
}

// fill reads r until b is full or r fails, and returns r's own error (io.EOF at its
// end; a truncated archive's body fails with io.ErrUnexpectedEOF, which io.ReadFull
// would not tell from a short end).
func fill(r io.Reader, b []byte) (int, error) {
	k := 0
	for k < len(b) {
		m, err := r.Read(b[k:])
		k += m
		if err != nil {
			return k, err
		}
	}
	return k, nil
}

// prune removes, below rel (a directory of dir's), every path the archive did not
// hold, where writable allows.
func (s *syncer) prune(rel string) error {
	names, err := s.t.Names(rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) {
			return nil
		}
		return err
	}
	slices.Sort(names)
	for _, n := range names {
		p := path.Join(rel, n)
		dir, held := s.seen[p]
		if !held {
			s.removeAll(p)
			continue
		}
		if !dir {
			continue // a file or link (or an entry refused: kept whole, as it is)
		}
		st, err := s.t.Lstat(p)
		if err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			if err := s.prune(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeAll removes rel and everything below it that writable allows, and reports
// whether rel is gone. Each path kept is counted as refused.
func (s *syncer) removeAll(rel string) bool {
	if !s.writable(rel) {
		s.refuse(rel)
		return false
	}
	st, err := s.t.Lstat(rel)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		names, err := s.t.Names(rel)
		if err != nil {
			s.refuse(rel)
			return false
		}
		all := true
		for _, n := range names {
			all = s.removeAll(path.Join(rel, n)) && all
		}
		if !all {
			return false
		}
	}
	if err := s.t.Remove(rel); err != nil {
		s.refuse(rel)
		return false
	}
	s.stats.Removed++
	return true
}
