// Package gitread reads what fsdiff needs from a workspace's git directory: the index
// (the stat data and object id git recorded for each tracked file) and blobs from the
// object store (loose objects and packs), in pure Go and with a bound on every parse.
//
// It never runs git and obeys nothing in the git directory: no configuration, no
// alternates, no hooks, no attributes, no filters, no commondir or gitdir pointers.
// Every file is opened through a [safefs.Dir] of the git directory, so nothing outside
// it, nor through a link, is read; every blob is checked against its object id (SHA-1 with collision
// detection) before it is returned, so a rewritten or forged object is an error, never
// content.
package gitread

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cordonhq/cordon/internal/safefs"
)

// Limits of the index parser. An index beyond them is refused as a whole (the caller
// then reads the workspace itself).
const (
	MaxIndexSize    = 32 << 20  // bytes of .git/index
	MaxIndexEntries = 1 << 20   // entries
	maxNameLen      = 4096      // bytes of one path
	maxNameBytes    = 128 << 20 // bytes of all paths (a v4 index compresses them)
)

// Errors returned by this package.
var (
	// ErrMalformed means an index, pack or object is not well-formed or is over a limit.
	ErrMalformed = errors.New("malformed git data")
	// ErrNotFound means the object store does not hold the object.
	ErrNotFound = errors.New("git object not found")
	// ErrMismatch means an object's content does not hash to its id.
	ErrMismatch = errors.New("git object does not match its id")
)

// Entry is what the index records for one tracked regular file.
type Entry struct {
	OID       plumbing.Hash
	Mode      uint32 // 0o100644 or 0o100755
	Size      uint32 // truncated to 32 bits, as git stores it
	CtimeSec  uint32
	CtimeNsec uint32
	MtimeSec  uint32
	MtimeNsec uint32
	Ino       uint32 // truncated to 32 bits
	UID, GID  uint32
	Dev       uint32
}

// Index is a parsed .git/index: the clean-candidate entries by path, and the index
// file's own modification time, which git's racy rule compares against.
type Index struct {
	Entries map[string]Entry
	ModTime time.Time
}

// ReadIndex reads and parses the index of the git directory dir (a workspace's
// .git). The index must be a regular file of at most [MaxIndexSize] bytes; a
// symbolic link is refused. It stops with ctx's error once ctx is done.
func ReadIndex(ctx context.Context, dir *safefs.Dir) (*Index, error) {
	f, err := dir.Open("index", MaxIndexSize)
	switch {
	case errors.Is(err, safefs.ErrNotRegular), errors.Is(err, safefs.ErrTooLarge):
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	case err != nil:
		return nil, err
	}
	defer f.Close()
	got, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// Sized by the stat (one allocation, no regrowth); read to EOF all the same, within
	// the limit, in case the file grew since.
	buf := bytes.NewBuffer(make([]byte, 0, got.Size()+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxIndexSize+1)); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	entries, err := ParseIndex(ctx, data)
	if err != nil {
		return nil, err
	}
	return &Index{Entries: entries, ModTime: got.ModTime()}, nil
}

// ParseIndex parses the bytes of an index file (versions 2, 3 and 4). It returns the
// stage-0 entries of regular files that git would compare by stat (not skip-worktree,
// not intent-to-add); paths in conflict are left out. Extensions are ignored. Any
// malformed entry, path or order refuses the whole index. It stops with ctx's error
// once ctx is done (a large index takes tens of milliseconds: a baseline ended early
// need not wait for it).
func ParseIndex(ctx context.Context, data []byte) (map[string]Entry, error) {
	if len(data) > MaxIndexSize {
		return nil, fmt.Errorf("%w: index over %d bytes", ErrMalformed, MaxIndexSize)
	}
	if len(data) < 12+sha1.Size || !bytes.Equal(data[:4], []byte("DIRC")) {
		return nil, fmt.Errorf("%w: not an index", ErrMalformed)
	}
	body, trailer := data[:len(data)-sha1.Size], data[len(data)-sha1.Size:]
	sum, err := checksum(ctx, body)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(sum, trailer) && !allZero(trailer) {
		return nil, fmt.Errorf("%w: index checksum", ErrMalformed)
	}
	version := binary.BigEndian.Uint32(data[4:8])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("%w: index version %d", ErrMalformed, version)
	}
	count := binary.BigEndian.Uint32(data[8:12])
	if count > MaxIndexEntries {
		return nil, fmt.Errorf("%w: %d index entries is over %d", ErrMalformed, count, MaxIndexEntries)
	}
	p := &indexParser{data: body, off: 12, version: version}
	out := make(map[string]Entry, min(int(count), len(body)/62))
	conflicted := map[string]bool{}
	for i := range count {
		if i%parseStride == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		e, name, stage, keep, err := p.entry()
		if err != nil {
			return nil, err
		}
		switch {
		case stage != 0:
			conflicted[name] = true
			delete(out, name)
		case keep && !conflicted[name]:
			out[name] = e
		}
	}
	return out, nil
}

// parseStride is how many index entries (or how many bytes, hashed) are parsed
// between two looks at the context.
const parseStride = 1 << 12

// checksum is the SHA-1 of body, hashed parseStride×64 bytes at a time while ctx is
// not done.
func checksum(ctx context.Context, body []byte) ([]byte, error) {
	h := sha1.New()
	for chunk := parseStride * 64; len(body) > 0; body = body[min(chunk, len(body)):] {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h.Write(body[:min(chunk, len(body))])
	}
	return h.Sum(nil), nil
}

func allZero(b []byte) bool { return bytes.Count(b, []byte{0}) == len(b) }

// indexParser walks the entries of an index.
type indexParser struct {
	data      []byte
	off       int
	version   uint32
	prev      string // previous path (v4 prefix compression, order check)
	prevStage uint16
	names     int // bytes of all paths so far
}

// entry parses the next entry: its stat data, path and stage, and whether fsdiff may
// use it (a regular file git compares by stat).
func (p *indexParser) entry() (e Entry, name string, stage uint16, keep bool, err error) {
	const fixed = 62
	start := p.off
	if len(p.data)-p.off < fixed {
		return e, "", 0, false, fmt.Errorf("%w: truncated index entry", ErrMalformed)
	}
	b := p.data[p.off : p.off+fixed]
	u := func(i int) uint32 { return binary.BigEndian.Uint32(b[i*4:]) }
	e.CtimeSec, e.CtimeNsec, e.MtimeSec, e.MtimeNsec = u(0), u(1), u(2), u(3)
	e.Dev, e.Ino, e.Mode, e.UID, e.GID, e.Size = u(4), u(5), u(6), u(7), u(8), u(9)
	copy(e.OID[:], b[40:60])
	flags := binary.BigEndian.Uint16(b[60:62])
	p.off += fixed
	var ext uint16
	if flags&0x4000 != 0 {
		if p.version < 3 || len(p.data)-p.off < 2 {
			return e, "", 0, false, fmt.Errorf("%w: extended flags", ErrMalformed)
		}
		ext = binary.BigEndian.Uint16(p.data[p.off:])
		p.off += 2
	}
	if name, err = p.name(flags, start); err != nil {
		return e, "", 0, false, err
	}
	stage = flags >> 12 & 3
	if name < p.prev || name == p.prev && stage <= p.prevStage && p.prev != "" {
		return e, "", 0, false, fmt.Errorf("%w: index entries out of order at %q", ErrMalformed, name)
	}
	p.prev, p.prevStage = name, stage
	const skipWorktree, intentToAdd = 1 << 14, 1 << 13
	keep = (e.Mode == 0o100644 || e.Mode == 0o100755) && ext&(skipWorktree|intentToAdd) == 0 && validPath(name)
	return e, name, stage, keep, nil
}

// name reads an entry's path: a length-prefixed, NUL-padded name (v2, v3) or a prefix
// of the previous path plus a NUL-terminated suffix (v4).
func (p *indexParser) name(flags uint16, start int) (string, error) {
	var name string
	if p.version == 4 {
		strip, err := p.varint()
		if err != nil || strip > uint64(len(p.prev)) {
			return "", fmt.Errorf("%w: v4 path prefix", ErrMalformed)
		}
		end := bytes.IndexByte(p.data[p.off:], 0)
		if end < 0 || len(p.prev)-int(strip)+end > maxNameLen {
			return "", fmt.Errorf("%w: v4 path", ErrMalformed)
		}
		name = p.prev[:len(p.prev)-int(strip)] + string(p.data[p.off:p.off+end])
		p.off += end + 1
	} else {
		n := int(flags & 0xfff)
		if n == 0xfff {
			n = bytes.IndexByte(p.data[p.off:], 0)
		}
		if n < 0 || n > maxNameLen || len(p.data)-p.off < n {
			return "", fmt.Errorf("%w: path length", ErrMalformed)
		}
		name = string(p.data[p.off : p.off+n])
		p.off += n
		// 1 to 8 NUL bytes pad the entry to a multiple of 8.
		pad := 8 - (p.off-start)%8
		if len(p.data)-p.off < pad || !allZero(p.data[p.off:p.off+pad]) {
			return "", fmt.Errorf("%w: entry padding", ErrMalformed)
		}
		p.off += pad
	}
	if p.names += len(name); p.names > maxNameBytes || name == "" || strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: index paths", ErrMalformed)
	}
	return name, nil
}

// varint reads git's offset encoding (used by v4 for the prefix length).
func (p *indexParser) varint() (uint64, error) {
	var v uint64
	for i := 0; ; i++ {
		if p.off >= len(p.data) || i > 8 {
			return 0, fmt.Errorf("%w: varint", ErrMalformed)
		}
		c := p.data[p.off]
		p.off++
		v = v<<7 | uint64(c&0x7f)
		if c&0x80 == 0 {
			return v, nil
		}
		v++
	}
}

// validPath reports whether name is a path git itself would check out: relative,
// clean, no empty, "." or ".." component and no ".git" component (in any case). An
// index entry failing it is never matched against the workspace.
func validPath(name string) bool {
	if strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
		return false
	}
	for rest, more := name, true; more; {
		var c string
		c, rest, more = strings.Cut(rest, "/")
		if c == "" || c == "." || c == ".." || strings.EqualFold(c, ".git") {
			return false
		}
	}
	return true
}
