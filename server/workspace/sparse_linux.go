package workspace

import (
	"archive/tar"
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// zeroBlock is what a hole reads as, a buffer's worth.
var zeroBlock [32 << 10]byte

// maxExtentLine bounds a sparse entry's extent line ("OFFSET LENGTH\\n").
const maxExtentLine = 48

// sparse syncs rel from a sparse entry (recordSparse: rec is the file's size, the
// body its extents). The whole size counts against the byte bound, as a file of
// zeros would: a sparse file in the workspace is that large to every tool that reads
// it. The file is written anew with its holes, as any change, where writable allows;
// a file of dir's with the same content is left as it is.
func (s *syncer) sparse(hdr *tar.Header, rel, rec string, body io.Reader) error {
	size, err := strconv.ParseInt(rec, 10, 64)
	if err != nil || size < 0 || hdr.Typeflag != tar.TypeReg {
		return &EntryError{Entry: hdr.Name, Reason: "a sparse file of size " + strconv.Quote(rec), Err: ErrMalformed}
	}
	charge := max(size, hdr.Size)
	if charge > s.lim.Bytes-s.stats.Bytes {
		return tooLarge(hdr.Name, "%d bytes; the archive may hold %d in all", size, s.lim.Bytes)
	}
	s.stats.Bytes += charge
	if !s.writable(rel) || !s.parentsDirs(rel) {
		s.refuse(rel)
		return nil
	}
	perm := uint32(hdr.Mode & 0o777)
	var old *os.File
	if st, err := s.t.Lstat(rel); err == nil {
		switch {
		case st.Mode&syscall.S_IFMT == syscall.S_IFDIR:
			if !s.removeAll(rel) {
				return nil // what writable keeps there stays: so does the entry
			}
		case st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Mode&0o7777 == perm && st.Size == size:
			if f, err := s.t.Open(rel); err == nil {
				defer f.Close()
				old = f
			}
		}
	}
	x := &extents{r: bufio.NewReaderSize(body, 32<<10), size: size, name: hdr.Name}
	if old != nil {
		// Compared before anything is written: a file the host has the same costs a
		// read of its data, as a dense one does, not a write of it.
		same, err := x.compare(old)
		if err != nil || same {
			return err
		}
	}
	err = s.t.WriteFileFunc(rel, perm, s.uid, s.gid, x.write)
	if bad := (*EntryError)(nil); errors.As(err, &bad) {
		return bad // the archive's: malformed
	}
	return s.wrote(hdr.Name, rel, err)
}

// extents reads a sparse entry's body: compare reads it against dir's file as far as
// they agree, write writes the new file.
type extents struct {
	r    *bufio.Reader
	size int64
	name string
	end  int64 // where the last extent read ends
	// After compare: old, the new file's content below done (dir's file's: the same),
	// and the extent being read where they differ: at off, pending read already, left
	// to read (none when they differ only past the last extent).
	old     *os.File
	done    int64
	off     int64
	pending []byte
	left    int64
	buf     [32 << 10]byte
	cmp     [32 << 10]byte
}

func (x *extents) malformed(reason string) error {
	return &EntryError{Entry: x.name, Reason: "a sparse file's extents: " + reason, Err: ErrMalformed}
}

// next reads the next extent line: ok false at the body's end.
func (x *extents) next() (off, n int64, ok bool, err error) {
	line, err := x.r.ReadSlice('\n')
	if errors.Is(err, io.EOF) && len(line) == 0 {
		return 0, 0, false, nil
	}
	if err != nil || len(line) > maxExtentLine {
		if errors.Is(err, bufio.ErrBufferFull) || err == nil || errors.Is(err, io.EOF) {
			return 0, 0, false, x.malformed("a bad extent line")
		}
		return 0, 0, false, x.malformed(err.Error())
	}
	a, b, cut := strings.Cut(strings.TrimSuffix(string(line), "\n"), " ")
	off, err1 := strconv.ParseInt(a, 10, 64)
	n, err2 := strconv.ParseInt(b, 10, 64)
	if !cut || err1 != nil || err2 != nil || off < x.end || n <= 0 || off > x.size || n > x.size-off {
		return 0, 0, false, x.malformed("extent " + strconv.Quote(string(line)) + " out of order or past the size")
	}
	return off, n, true, nil
}

// compare reads the body against old (dir's file, of the same size) until they
// differ, and reports whether they never do.
func (x *extents) compare(old *os.File) (bool, error) {
	x.old = old
	for {
		off, n, ok, err := x.next()
		if err != nil {
			return false, err
		}
		if !ok {
			break
		}
		if !zeroes(old, x.end, off, x.cmp[:]) {
			x.done, x.off, x.left = x.end, off, n
			return false, nil
		}
		for at := off; at < off+n; {
			k, err := io.ReadFull(x.r, x.buf[:min(off+n-at, int64(len(x.buf)))])
			if err != nil {
				return false, x.malformed(unexpected(err).Error())
			}
			if m, _ := old.ReadAt(x.cmp[:k], at); m != k || !bytes.Equal(x.cmp[:k], x.buf[:k]) {
				x.done, x.off, x.pending, x.left = at, at, x.buf[:k], off+n-at-int64(k)
				return false, nil
			}
			at += int64(k)
		}
		x.end = off + n
	}
	if !zeroes(old, x.end, x.size, x.cmp[:]) {
		x.done = x.end
		return false, nil
	}
	return true, nil
}

// write fills f: what compare found the same (old's data below done), then each
// extent at its offset, holes left, f truncated to the size.
func (x *extents) write(f *os.File) error {
	if x.old != nil {
		if err := linux.CopyExtents(f, x.old, x.done); err != nil {
			return err
		}
		if len(x.pending) > 0 || x.left > 0 {
			if _, err := f.WriteAt(x.pending, x.off); err != nil {
				return err
			}
			at := x.off + int64(len(x.pending))
			if err := x.copy(f, at, x.left); err != nil {
				return err
			}
			x.end = at + x.left
		}
	}
	for {
		off, n, ok, err := x.next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		if err := x.copy(f, off, n); err != nil {
			return err
		}
		x.end = off + n
	}
	return f.Truncate(x.size)
}

// copy writes the extent's n bytes at off.
func (x *extents) copy(f *os.File, off, n int64) error {
	for n > 0 {
		k, err := io.ReadFull(x.r, x.buf[:min(n, int64(len(x.buf)))])
		if err != nil {
			return x.malformed(unexpected(err).Error())
		}
		if _, err := f.WriteAt(x.buf[:k], off); err != nil {
			return err
		}
		off += int64(k)
		n -= int64(k)
	}
	return nil
}

// zeroes reports whether f reads as zeros from a to b: its holes there are, its data
// is read (buf's size at a time) and checked.
func zeroes(f *os.File, a, b int64, buf []byte) bool {
	return linux.DataExtents(f, a, b, func(start, end int64) error {
		for off := start; off < end; {
			k, _ := f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
			if k == 0 || !bytes.Equal(buf[:k], zeroBlock[:k]) {
				return errNotZero
			}
			off += int64(k)
		}
		return nil
	}) == nil
}

// errNotZero ends zeroes at the first byte that is not zero.
var errNotZero = errors.New("not zero")
