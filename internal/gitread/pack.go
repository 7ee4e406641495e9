package gitread

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cordonhq/cordon/internal/safefs"
)

// pack is one objects/pack/pack-*.{idx,pack} pair, read with ReadAt and never loaded
// whole.
type pack struct {
	idx, data *os.File
	n         uint32 // objects
	dataSize  int64
	fanout    [256]uint32
}

// Object types in a pack.
const (
	objBlob     = 3
	objOFSDelta = 6
	objREFDelta = 7
)

const idxHeader = 8 + 256*4

func openPack(dir *safefs.Dir, base string) (*pack, error) {
	idx, err := openRegular(dir, base+".idx")
	if err != nil {
		return nil, err
	}
	data, err := openRegular(dir, base+".pack")
	if err != nil {
		idx.Close()
		return nil, err
	}
	p := &pack{idx: idx, data: data}
	if err := p.check(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *pack) close() {
	p.idx.Close()
	p.data.Close()
}

// check validates the idx (version 2) header and fan-out table against the file
// sizes, so that every later ReadAt is in bounds.
func (p *pack) check() error {
	var hdr [idxHeader]byte
	if _, err := p.idx.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("%w: pack index header", ErrMalformed)
	}
	if !bytes.Equal(hdr[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return fmt.Errorf("%w: pack index version", ErrMalformed)
	}
	for i := range p.fanout {
		p.fanout[i] = binary.BigEndian.Uint32(hdr[8+i*4:])
		if i > 0 && p.fanout[i] < p.fanout[i-1] {
			return fmt.Errorf("%w: pack index fan-out", ErrMalformed)
		}
	}
	p.n = p.fanout[255]
	st, err := p.idx.Stat()
	if err != nil {
		return err
	}
	if min := int64(idxHeader) + int64(p.n)*28 + 40; st.Size() < min {
		return fmt.Errorf("%w: pack index of %d bytes for %d objects", ErrMalformed, st.Size(), p.n)
	}
	ds, err := p.data.Stat()
	if err != nil {
		return err
	}
	p.dataSize = ds.Size()
	var ph [12]byte
	if _, err := p.data.ReadAt(ph[:], 0); err != nil || !bytes.Equal(ph[:4], []byte("PACK")) {
		return fmt.Errorf("%w: pack header", ErrMalformed)
	}
	return nil
}

// find returns the offset of oid in the pack, by binary search in the idx.
func (p *pack) find(oid plumbing.Hash) (int64, bool, error) {
	lo := uint32(0)
	if oid[0] > 0 {
		lo = p.fanout[oid[0]-1]
	}
	hi := p.fanout[oid[0]]
	var name [20]byte
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, err := p.idx.ReadAt(name[:], idxHeader+int64(mid)*20); err != nil {
			return 0, false, fmt.Errorf("%w: pack index names", ErrMalformed)
		}
		switch c := bytes.Compare(name[:], oid[:]); {
		case c == 0:
			off, err := p.offset(mid)
			return off, err == nil, err
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return 0, false, nil
}

// offset reads the pack offset of object i (a 31-bit offset or an index into the
// 64-bit table).
func (p *pack) offset(i uint32) (int64, error) {
	var b [8]byte
	base := int64(idxHeader) + int64(p.n)*24
	if _, err := p.idx.ReadAt(b[:4], base+int64(i)*4); err != nil {
		return 0, fmt.Errorf("%w: pack index offsets", ErrMalformed)
	}
	off := int64(binary.BigEndian.Uint32(b[:4]))
	if off&0x80000000 != 0 {
		j := off &^ 0x80000000
		if j >= int64(p.n) {
			return 0, fmt.Errorf("%w: pack index large offset", ErrMalformed)
		}
		if _, err := p.idx.ReadAt(b[:], base+int64(p.n)*4+j*8); err != nil {
			return 0, fmt.Errorf("%w: pack index large offsets", ErrMalformed)
		}
		off = int64(binary.BigEndian.Uint64(b[:]))
	}
	if off < 12 || off >= p.dataSize-20 {
		return 0, fmt.Errorf("%w: pack offset %d", ErrMalformed, off)
	}
	return off, nil
}

// header is an object's entry header in the pack.
type header struct {
	typ     int
	size    int64 // inflated size (of the delta, for deltas)
	base    int64 // the base's offset, for deltas
	dataOff int64 // where the zlib stream starts
}

// header parses the entry at off. A REF delta's base must be in this pack; an OFS
// delta's base must come before it, so a chain of OFS deltas cannot loop (REF delta
// loops end at MaxDepth).
func (p *pack) header(off int64) (header, error) {
	r := &atReader{r: p.data, off: off, end: min(off+64, p.dataSize)}
	h := header{}
	c, err := r.ReadByte()
	if err != nil {
		return h, fmt.Errorf("%w: pack entry", ErrMalformed)
	}
	h.typ, h.size = int(c>>4&7), int64(c&15)
	for shift := 4; c&0x80 != 0; shift += 7 {
		if c, err = r.ReadByte(); err != nil || shift > 56 {
			return h, fmt.Errorf("%w: pack entry size", ErrMalformed)
		}
		h.size |= int64(c&0x7f) << shift
	}
	switch h.typ {
	case objOFSDelta:
		d, err := ofsDistance(r)
		if err != nil || d <= 0 || d > off-12 {
			return h, fmt.Errorf("%w: delta base distance", ErrMalformed)
		}
		h.base = off - d
	case objREFDelta:
		var ref plumbing.Hash
		for i := range ref {
			if ref[i], err = r.ReadByte(); err != nil {
				return h, fmt.Errorf("%w: delta base id", ErrMalformed)
			}
		}
		found := false
		if h.base, found, err = p.find(ref); err != nil || !found {
			return h, fmt.Errorf("%w: delta base %s not in the pack", ErrMalformed, ref)
		}
	}
	h.dataOff = r.off
	return h, nil
}

// atReader reads bytes one at a time from r between off and end.
type atReader struct {
	r        io.ReaderAt
	off, end int64
}

func (a *atReader) ReadByte() (byte, error) {
	if a.off >= a.end {
		return 0, io.ErrUnexpectedEOF
	}
	var b [1]byte
	if _, err := a.r.ReadAt(b[:], a.off); err != nil {
		return 0, err
	}
	a.off++
	return b[0], nil
}

// ofsDistance reads an OFS delta's distance to its base.
func ofsDistance(r io.ByteReader) (int64, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	d := int64(c & 0x7f)
	for n := 1; c&0x80 != 0; n++ {
		if c, err = r.ReadByte(); err != nil || n > 8 {
			return 0, fmt.Errorf("%w: distance", ErrMalformed)
		}
		d = (d+1)<<7 | int64(c&0x7f)
	}
	return d, nil
}

// read returns the blob at off, size bytes long, resolving its delta chain from the
// base up. Each link is inflated within MaxObject and charged to the store's budget.
func (p *pack) read(s *Store, off, size int64) ([]byte, error) {
	var chain []header
	for {
		h, err := p.header(off)
		if err != nil {
			return nil, err
		}
		if h.typ != objOFSDelta && h.typ != objREFDelta {
			if h.typ != objBlob {
				return nil, fmt.Errorf("%w: object of type %d, want a blob", ErrMalformed, h.typ)
			}
			chain = append(chain, h)
			break
		}
		if chain = append(chain, h); len(chain) > MaxDepth {
			return nil, fmt.Errorf("%w: delta chain longer than %d", ErrMalformed, MaxDepth)
		}
		off = h.base
	}
	base := chain[len(chain)-1]
	data, err := p.inflateAt(s, base)
	if err != nil {
		return nil, err
	}
	for i := len(chain) - 2; i >= 0; i-- {
		delta, err := p.inflateAt(s, chain[i])
		if err != nil {
			return nil, err
		}
		if data, err = patch(data, delta); err != nil {
			return nil, err
		}
		if err := s.spend(int64(len(data))); err != nil {
			return nil, err
		}
	}
	if int64(len(data)) != size {
		return nil, fmt.Errorf("%w: blob of %d bytes, want %d", ErrMalformed, len(data), size)
	}
	return data, nil
}

func (p *pack) inflateAt(s *Store, h header) ([]byte, error) {
	if err := s.spend(h.size); err != nil {
		return nil, err
	}
	r := bufio.NewReader(io.NewSectionReader(p.data, h.dataOff, p.dataSize-h.dataOff))
	return inflate(r, h.size)
}
