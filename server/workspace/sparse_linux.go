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

// errSame: the sparse file written is the one dir has (the new one is dropped).
var errSame = errors.New("the same file")

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
	x := &extents{r: bufio.NewReaderSize(body, 32<<10), size: size, old: old, same: old != nil, name: hdr.Name}
	err = s.t.WriteFileFunc(rel, perm, s.uid, s.gid, x.write)
	var bad *EntryError
	switch {
	case errors.Is(err, errSame):
		return nil
	case errors.As(err, &bad):
		return bad
	}
	return s.wrote(hdr.Name, rel, err)
}

// extents writes a sparse entry's body into a new file, comparing it with dir's
// file old (when not nil) as it goes.
type extents struct {
	r    *bufio.Reader
	size int64
	old  *os.File
	same bool // no difference with old so far
	name string
	buf  [32 << 10]byte
	cmp  [32 << 10]byte
}

func (x *extents) malformed(reason string) error {
	return &EntryError{Entry: x.name, Reason: "a sparse file's extents: " + reason, Err: ErrMalformed}
}

// write fills f: each extent at its offset, holes left, f truncated to the size.
// It fails with errSame when f is old's copy.
func (x *extents) write(f *os.File) error {
	end := int64(0) // where the last extent ended
	for {
		line, err := x.r.ReadSlice('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			break
		}
		if err != nil || len(line) > maxExtentLine {
			if errors.Is(err, bufio.ErrBufferFull) || err == nil || errors.Is(err, io.EOF) {
				return x.malformed("a bad extent line")
			}
			return x.malformed(err.Error())
		}
		a, b, ok := strings.Cut(strings.TrimSuffix(string(line), "\n"), " ")
		off, err1 := strconv.ParseInt(a, 10, 64)
		n, err2 := strconv.ParseInt(b, 10, 64)
		if !ok || err1 != nil || err2 != nil || off < end || n <= 0 || off > x.size || n > x.size-off {
			return x.malformed("extent " + strconv.Quote(string(line)) + " out of order or past the size")
		}
		if x.same && !zeroes(x.old, end, off, x.cmp[:]) {
			x.same = false
		}
		if err := x.copy(f, off, n); err != nil {
			return err
		}
		end = off + n
	}
	if x.same && !zeroes(x.old, end, x.size, x.cmp[:]) {
		x.same = false
	}
	if x.same {
		return errSame
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
		if x.same {
			m, _ := x.old.ReadAt(x.cmp[:k], off)
			x.same = m == k && bytes.Equal(x.cmp[:k], x.buf[:k])
		}
		off += int64(k)
		n -= int64(k)
	}
	return nil
}

// zeroes reports whether f reads as zeros from a to b: its holes there are, its data
// is read (buf's size at a time) and checked.
func zeroes(f *os.File, a, b int64, buf []byte) bool {
	for a < b {
		start, end, ok, err := linux.NextData(f, a)
		if err != nil {
			return false
		}
		if !ok || start >= b {
			return true
		}
		for off := max(start, a); off < min(end, b); {
			k, _ := f.ReadAt(buf[:min(int64(len(buf)), min(end, b)-off)], off)
			if k == 0 || !bytes.Equal(buf[:k], zeroBlock[:k]) {
				return false
			}
			off += int64(k)
		}
		a = end
	}
	return true
}
