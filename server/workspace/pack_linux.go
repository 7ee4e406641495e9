package workspace

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// Pack writes the directory dir (reached without links, as named) to w as a tar
// archive, bounded by lim: directories, regular files and symbolic links (as links,
// never followed), in name order; anything else (a device, a FIFO, a socket) is
// skipped and counted. Modes keep their permission bits only; owners are not written.
// A workspace past lim or past an upload's bounds of names (MaxPath, MaxDepth: what
// Pack writes, Unpack takes), or a file that changes size while it is read, ends it
// with an error after part of the archive was written: the caller must not let that
// part pass for the whole (end the stream without its end-of-archive blocks).
func Pack(w io.Writer, dir string, lim Limits) (Stats, int, error) {
	return PackOnly(w, dir, lim, nil)
}

// PackOnly is [Pack] of the paths keep reports true for (rel is a clean path below
// dir): a path it refuses is left out with everything below it, and not counted. A
// nil keep keeps everything. A session filling a Pod's workspace packs it without the
// plan's hidden paths, which have no business in the Pod.
func PackOnly(w io.Writer, dir string, lim Limits, keep func(rel string) bool) (Stats, int, error) {
	p := &packer{tw: tar.NewWriter(w), lim: lim, keep: keep}
	err := p.pack(dir)
	return p.stats, p.skipped, err
}

// pack writes the archive of dir; a pack of changes (a stream with a base) is marked
// as one in its global header and ends with the paths removed since the base.
func (p *packer) pack(dir string) error {
	t, err := linux.OpenTree(dir)
	if err != nil {
		return err
	}
	defer t.Close()
	d, err := t.OpenDir(".")
	if err != nil {
		return err
	}
	defer d.Close()
	changes := p.stream != nil && p.stream.base != nil
	if changes {
		hdr := &tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{recordPack: "changes"}, Format: tar.FormatPAX}
		if err := p.tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	if err := p.dir(d, ""); err != nil {
		return err
	}
	if changes {
		if err := p.removed(); err != nil {
			return err
		}
	}
	return p.tw.Close()
}

type packer struct {
	tw      *tar.Writer
	lim     Limits
	stats   Stats
	skipped int
	seen    int // entries counted against lim.Entries: packed, skipped and to come
	keep    func(string) bool
	stream  *stream // PackChanges only
	read    int     // names read from directories, every pass counted
}

// epoch is every entry's modification time: the archive is the same bytes for the
// same tree.
var epoch = time.Unix(0, 0)

// dirBatch is the fewest of a directory's names a pack holds at a time, in name
// order: a sandbox can fill one directory with millions, and the daemon packing it is
// the one process every tenant shares. A directory of n names is read in batches of
// max(dirBatch, n/dirPasses), so it is read at most dirPasses+1 times whatever its
// width (a batch of 1024 read a directory of 100000 names 98 times: quadratic), and
// the names a pack holds, one batch per directory on its way down, stay within
// lim.Entries in all.
const (
	dirBatch  = 1024
	dirPasses = 8
)

// dir packs the entries of d, named below prefix, in name order. Every entry the
// directory holds (keep's refused ones aside) counts against lim.Entries before any is
// packed, those Pack skips (FIFOs, sockets, devices) too; past the bound the pack
// ends with an error. Its names are then read a batch at a time (dirBatch), the
// smallest not yet packed each time: the directory is read once per batch, never
// held whole.
func (p *packer) dir(d *linux.Dir, prefix string) error {
	seen, left := 0, p.lim.Entries-p.seen
	err := d.EachNames(dirBatch, func(names []string) error {
		p.read += len(names)
		for _, n := range names {
			if p.keep == nil || p.keep(path.Join(prefix, n)) {
				seen++
			}
		}
		if seen > left {
			return tooLarge(path.Join(prefix, names[0]), "more than %d entries (a directory's entries count, those a download leaves out too)", p.lim.Entries)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrTooLarge) {
			return err
		}
		return fmt.Errorf("listing %q: %w", prefix, err)
	}
	p.seen += seen
	next := nextNames{keep: max(dirBatch, (seen+dirPasses-1)/dirPasses)}
	for taken := 0; ; {
		err := d.EachNames(dirBatch, func(names []string) error {
			p.read += len(names)
			return next.offer(names)
		})
		if err != nil {
			return fmt.Errorf("listing %q: %w", prefix, err)
		}
		names := next.take()
		if len(names) == 0 {
			return nil
		}
		// Names made since the count are not packed uncounted: the directory changed
		// while it was read, as a file that changes size ends the pack.
		for _, n := range names {
			if p.keep == nil || p.keep(path.Join(prefix, n)) {
				taken++
			}
		}
		if taken > seen {
			return fmt.Errorf("%q: changed while it was read (%d entries, then more)", prefix, seen)
		}
		if err := p.entries(d, prefix, names); err != nil {
			return err
		}
		if len(names) < next.keep {
			return nil // this pass found every name left: none is past the last
		}
	}
}

// entries packs the entries names of d, named below prefix, counted against
// lim.Entries already (p.seen).
func (p *packer) entries(d *linux.Dir, prefix string, names []string) error {
	for _, n := range names {
		rel := path.Join(prefix, n)
		if p.keep != nil && !p.keep(rel) {
			continue
		}
		st, err := d.Lstat(n)
		if err != nil {
			return err
		}
		if t := st.Mode & syscall.S_IFMT; t != syscall.S_IFDIR && t != syscall.S_IFREG && t != syscall.S_IFLNK {
			p.skipped++
			continue
		}
		// Bounded as an upload's names are: a sandbox can make a tree deeper than any
		// upload, and packing holds a descriptor for each directory on the way down,
		// so a tree tens of thousands deep would take every descriptor the server has.
		if len(rel) > MaxPath || strings.Count(rel, "/") >= MaxDepth {
			return tooLarge(rel, "a path longer than %d bytes or deeper than %d components", MaxPath, MaxDepth)
		}
		p.stats.Entries++
		hdr := &tar.Header{Name: rel, Mode: int64(st.Mode & 0o777), ModTime: epoch, Format: tar.FormatPAX}
		if p.stream != nil {
			now := linux.Stat{Mode: st.Mode, Size: st.Size, Mtime: st.Mtim.Nano(), Ctime: st.Ctim.Nano(), Ino: st.Ino}
			if p.stream.unchanged(rel, now) {
				err = p.same(d, n, hdr, now)
				if err != nil {
					return err
				}
				continue
			}
		}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			err = p.subdir(d, n, hdr)
		case syscall.S_IFREG:
			err = p.file(d, n, hdr)
		case syscall.S_IFLNK:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = d.Readlink(n); err == nil {
				err = p.tw.WriteHeader(hdr)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// nextNames keeps the keep smallest names offered that are past the last it gave.
type nextNames struct {
	keep  int
	after string // the last name taken
	taken bool   // after is set
	names []string
}

// offer adds a batch of a directory's names; it holds at most 2×keep of them.
func (s *nextNames) offer(batch []string) error {
	for _, n := range batch {
		if s.taken && n <= s.after {
			continue
		}
		s.names = append(s.names, n)
		if len(s.names) >= 2*s.keep {
			slices.Sort(s.names)
			s.names = slices.Clip(s.names[:s.keep])
		}
	}
	return nil
}

// take returns the names kept, sorted, at most keep, and starts the next batch
// after them.
func (s *nextNames) take() []string {
	slices.Sort(s.names)
	out := s.names[:min(len(s.names), s.keep)]
	s.names = nil
	if len(out) > 0 {
		s.after, s.taken = out[len(out)-1], true
	}
	return out
}

func (p *packer) subdir(d *linux.Dir, n string, hdr *tar.Header) error {
	hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
	if err := p.tw.WriteHeader(hdr); err != nil {
		return err
	}
	sub, err := d.Sub(n)
	if err != nil {
		return err
	}
	defer sub.Close()
	return p.dir(sub, path.Clean(hdr.Name))
}

func (p *packer) file(d *linux.Dir, n string, hdr *tar.Header) error {
	f, err := d.Open(n)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%q: replaced while it was read", hdr.Name)
	}
	if fi.Size() > p.lim.Bytes-p.stats.Bytes {
		return tooLarge(hdr.Name, "past %d bytes in all", p.lim.Bytes)
	}
	size := fi.Size()
	if p.stream != nil {
		defer p.stream.reread(hdr.Name, f)
		if sparse, err := p.sparse(f, hdr, size); sparse || err != nil {
			p.stats.Bytes += size
			return err
		}
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, size
	if err := p.tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.CopyN(p.tw, io.NewSectionReader(f, 0, hdr.Size), hdr.Size); err != nil {
		return fmt.Errorf("%q: %w (changed while it was read)", hdr.Name, err)
	}
	p.stats.Bytes += hdr.Size
	return nil
}

// same counts the path n of d, unchanged since the stream's last pack, without an
// entry: a directory is walked all the same (what is below it may have changed).
func (p *packer) same(d *linux.Dir, n string, hdr *tar.Header, st linux.Stat) error {
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		if st.Size > p.lim.Bytes-p.stats.Bytes {
			return tooLarge(hdr.Name, "past %d bytes in all", p.lim.Bytes)
		}
		p.stats.Bytes += st.Size
	case syscall.S_IFDIR:
		sub, err := d.Sub(n)
		if err != nil {
			return err
		}
		defer sub.Close()
		return p.dir(sub, hdr.Name)
	}
	return nil
}
