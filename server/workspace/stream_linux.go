package workspace

import (
	"archive/tar"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// A pack stream's archives (a Pod's workspace read back after each command) carry
// what changed, not the whole tree each time: a sync's cost is what the sandbox
// changed, not what its workspace holds. [PackChanges] writes them; [SyncFrom] reads
// them. Both ends are cordon's; the records below are theirs (PAX records of the
// "CORDON." vendor, which other tar readers ignore), and a sync reads them as hostile
// input like the rest of the archive.
const (
	// recordPack, in the archive's first entry (a global header), says the archive
	// holds only what changed since the stream's last pack ("changes"): an entry
	// for each path made or changed since, one for each path removed, and nothing
	// for the rest, which stays as it is.
	recordPack = "CORDON.pack"
	// recordRemoved marks an entry of a changes archive as a path removed since the
	// last pack, with everything below it.
	recordRemoved = "CORDON.removed"
	// recordSparse marks a regular file with holes and gives its size: its body is
	// its data extents, each a line "OFFSET LENGTH\n" then LENGTH bytes, in order;
	// the rest of the file is holes.
	recordSparse = "CORDON.sparse"
)

// Stamps are a pack's stamps by path: a digest of how the pack found each (the
// inode's identity, size, times and mode). A path whose stamp is the same at the next
// pack did not change since: any write, chmod, rename over it or new inode moves its
// change time, which no one but the kernel sets. A stamp taken within racyWindow of
// its pack's start is racy (a write in the same clock tick would keep every time):
// it is 0, which never matches, and the next pack reads the path again, as git does
// with racy index entries. The digest is keyed anew by each process (hash/maphash),
// so no one can choose times and sizes whose digest matches another's. A digest's
// lowest bit is 0; a pack sets it in its base's stamps as it finds their paths.
type Stamps map[string]uint64

// MaxStamps bounds the stamps a pack keeps (a digest and a path each, in the
// workspace sidecar's small memory): past it a pack keeps none, and the next pack
// writes the whole tree.
var MaxStamps = 100_000

// MaxStampBytes bounds the memory of the stamps a pack keeps by what their paths take
// (a path is up to MaxPath bytes) and stampOverhead each: past it, too, a pack keeps
// none. A pack holds two sets, its base's and its own: both must fit in the sidecar's
// 64 MiB with the garbage collector's room (TestRedTeamSyncLongPathsStampBytes).
var MaxStampBytes = 12 << 20

// stampOverhead is what a stamp costs beside its path's bytes: the digest, the
// string's header, a map bucket's share.
const stampOverhead = 64

// racyWindow: file times come from the kernel's coarse clock (a tick, at most
// 10 ms); 100 ms leaves room for the tick and for clock slew (audit/fsdiff's rule).
const racyWindow = 100 * time.Millisecond

// stampSeed keys this process's digests.
var stampSeed = maphash.MakeSeed()

// coarseWindow is the racy window of a path whose times hold whole seconds only: a
// file system that keeps no finer times (ext4 with small inodes, FAT, some network
// and shared file systems) gives a write in the same second the same times.
const coarseWindow = 2 * time.Second

// stampOf is st's stamp: 0 when it changed at or past recent (ns), or within
// coarseWindow of it when its times are whole seconds.
func stampOf(st linux.Stat, recent int64) uint64 {
	if st.Ctime%1e9 == 0 && st.Mtime%1e9 == 0 {
		recent -= int64(coarseWindow - racyWindow)
	}
	if st.Ctime >= recent || st.Mtime >= recent {
		return 0
	}
	var b [36]byte
	binary.LittleEndian.PutUint64(b[0:], st.Ino)
	binary.LittleEndian.PutUint64(b[8:], uint64(st.Size))
	binary.LittleEndian.PutUint64(b[16:], uint64(st.Mtime))
	binary.LittleEndian.PutUint64(b[24:], uint64(st.Ctime))
	binary.LittleEndian.PutUint32(b[32:], st.Mode)
	d := maphash.Bytes(stampSeed, b[:]) &^ 1
	if d == 0 {
		d = 2
	}
	return d
}

// PackChanges writes dir as [Pack] does for a pack stream, and returns the stamps of
// every path it walked, for the next. With base (the stamps of the stream's last
// pack, which its reader took whole) it writes only what changed since: the
// archive starts with a global header that says so, has no entry for a path whose
// stamp is the same (directories are walked all the same), and ends with an entry
// for each path of base's that is gone (the topmost of a removed tree). With a nil
// base it writes the whole tree. Either way a regular file with holes is written with
// its data extents only (recordSparse): a hole costs neither side anything.
// The bounds are Pack's, counting every path walked (and every regular file's
// whole size) whether written or not. A base serves one pack: PackChanges marks its
// stamps as it finds their paths.
func PackChanges(w io.Writer, dir string, lim Limits, base Stamps) (Stats, int, Stamps, error) {
	p := &packer{tw: tar.NewWriter(w), lim: lim, stream: &stream{
		base: base, next: Stamps{}, recent: time.Now().Add(-racyWindow).UnixNano(),
	}}
	if err := p.pack(dir); err != nil {
		return p.stats, p.skipped, nil, err
	}
	return p.stats, p.skipped, p.stream.next, nil
}

// stream is a packer's state in a pack stream.
type stream struct {
	base, next Stamps // next is nil once past MaxStamps or MaxStampBytes
	held       int    // what next takes (MaxStampBytes)
	recent     int64  // a change time at or past it (ns) is racy
}

// unchanged records rel's stamp and reports whether base has the same (not racy);
// it marks rel found in base.
func (s *stream) unchanged(rel string, st linux.Stat) bool {
	now := stampOf(st, s.recent)
	if s.next != nil {
		s.held += len(rel) + stampOverhead
		if len(s.next) >= MaxStamps || s.held > MaxStampBytes {
			s.next = nil
		} else {
			s.next[rel] = now
		}
	}
	was, ok := s.base[rel]
	if ok {
		s.base[rel] = was | 1
	}
	return ok && now != 0 && was&^1 == now
}

// reread makes rel's stamp racy when f changed while it was read (its stamp is no
// longer the one recorded): the next pack reads it again.
func (s *stream) reread(rel string, f *os.File) {
	if s.next == nil || s.next[rel] == 0 {
		return
	}
	if st, err := linux.Fstat(int(f.Fd())); err != nil || stampOf(st, s.recent) != s.next[rel] {
		s.next[rel] = 0
	}
}

// removed writes an entry for each path of base's that the walk did not find, but
// for those below another one.
func (p *packer) removed() error {
	var gone []string
	for rel, d := range p.stream.base {
		if d&1 == 0 {
			gone = append(gone, rel)
		}
	}
	slices.Sort(gone)
	last := ""
	for _, rel := range gone {
		if last != "" && strings.HasPrefix(rel, last+"/") {
			continue
		}
		last = rel
		hdr := &tar.Header{Name: rel, Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX,
			PAXRecords: map[string]string{recordRemoved: "1"}}
		if err := p.tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	return nil
}

// sparse writes the regular file f (hdr filled but for its size) as a sparse entry
// when it has holes, and reports whether it did; a file without holes is left to
// the caller. Its data extents are found with SEEK_DATA/SEEK_HOLE; a file that
// changes size as it is read ends the pack with an error, as in Pack.
func (p *packer) sparse(f *os.File, hdr *tar.Header, size int64) (bool, error) {
	type extent struct{ off, n int64 }
	var ext []extent
	data := int64(0)
	err := linux.DataExtents(f, 0, size, func(start, end int64) error {
		ext = append(ext, extent{start, end - start})
		data += end - start
		return nil
	})
	if err != nil {
		return false, err
	}
	if data == size {
		return false, nil // no hole: a plain entry
	}
	body := int64(0)
	for _, e := range ext {
		body += int64(len(extentLine(e.off, e.n))) + e.n
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, body
	hdr.PAXRecords = map[string]string{recordSparse: strconv.FormatInt(size, 10)}
	if err := p.tw.WriteHeader(hdr); err != nil {
		return true, err
	}
	for _, e := range ext {
		if _, err := io.WriteString(p.tw, extentLine(e.off, e.n)); err != nil {
			return true, err
		}
		if _, err := io.Copy(p.tw, io.NewSectionReader(f, e.off, e.n)); err != nil {
			return true, fmt.Errorf("%q: %w (changed while it was read)", hdr.Name, err)
		}
	}
	return true, nil
}

func extentLine(off, n int64) string {
	return strconv.FormatInt(off, 10) + " " + strconv.FormatInt(n, 10) + "\n"
}
