package gitread

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// rawEntry is one index entry to encode; name is written as is (v2) or as a v4 suffix
// after stripping strip bytes of the previous name.
type rawEntry struct {
	name  string
	mode  uint32
	flags uint16
	strip int
}

// buildIndex encodes entries as an index of the given version, with a correct
// checksum unless count overrides the number of entries in the header.
func buildIndex(version uint32, count int, entries []rawEntry) []byte {
	var b bytes.Buffer
	b.WriteString("DIRC")
	binary.Write(&b, binary.BigEndian, version)
	if count < 0 {
		count = len(entries)
	}
	binary.Write(&b, binary.BigEndian, uint32(count))
	for _, e := range entries {
		start := b.Len()
		var fixed [62]byte
		binary.BigEndian.PutUint32(fixed[24:], e.mode)
		flags := e.flags
		if version < 4 {
			flags |= uint16(min(len(e.name), 0xfff))
		}
		binary.BigEndian.PutUint16(fixed[60:], flags)
		b.Write(fixed[:])
		if version == 4 {
			b.WriteByte(byte(e.strip)) // strip < 128: one byte
			b.WriteString(e.name)
			b.WriteByte(0)
			continue
		}
		b.WriteString(e.name)
		b.Write(make([]byte, 8-(b.Len()-start)%8))
	}
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}

func TestParseIndexAttacks(t *testing.T) {
	file := uint32(0o100644)
	for _, tc := range []struct {
		name string
		data []byte
		want []string // paths kept; nil with wantErr
		err  bool
	}{
		{"good", buildIndex(2, -1, []rawEntry{{name: "a", mode: file}, {name: "b/c", mode: file}}), []string{"a", "b/c"}, false},
		{"parent escape", buildIndex(2, -1, []rawEntry{{name: "../x", mode: file}, {name: "a/../../y", mode: file}}), []string{}, false},
		{"absolute", buildIndex(2, -1, []rawEntry{{name: "/etc/passwd", mode: file}}), []string{}, false},
		{"into .git", buildIndex(2, -1, []rawEntry{{name: ".git/config", mode: file}, {name: "sub/.GIT/hooks/x", mode: file}}), []string{}, false},
		{"dot and empty components", buildIndex(2, -1, []rawEntry{{name: "a/./b", mode: file}, {name: "a//b", mode: file}, {name: "d/", mode: file}}), []string{}, false},
		{"not a regular file", buildIndex(2, -1, []rawEntry{{name: "link", mode: 0o120000}, {name: "sub", mode: 0o160000}}), []string{}, false},
		{"conflict stages", buildIndex(2, -1, []rawEntry{{name: "c", mode: file, flags: 1 << 12}, {name: "c", mode: file, flags: 2 << 12}}), []string{}, false},
		{"NUL in a name", buildIndex(2, -1, []rawEntry{{name: "a\x00b", mode: file}}), nil, true},
		{"out of order", buildIndex(2, -1, []rawEntry{{name: "b", mode: file}, {name: "a", mode: file}}), nil, true},
		{"duplicate", buildIndex(2, -1, []rawEntry{{name: "a", mode: file}, {name: "a", mode: file}}), nil, true},
		{"count beyond the data", buildIndex(2, 1000, []rawEntry{{name: "a", mode: file}}), nil, true},
		{"huge count", buildIndex(2, 1<<31, nil), nil, true},
		{"bad version", buildIndex(5, -1, nil), nil, true},
		{"v4 strip beyond the previous name", buildIndex(4, -1, []rawEntry{{name: "a", mode: file}, {name: "b", mode: file, strip: 9}}), nil, true},
		{"v4", buildIndex(4, -1, []rawEntry{{name: "dir/a", mode: file}, {name: "b", mode: file, strip: 1}}), []string{"dir/a", "dir/b"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseIndex(context.Background(), tc.data)
			if tc.err {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("got %v, %v; want ErrMalformed", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("kept %v; want %v", got, tc.want)
			}
			for _, p := range tc.want {
				if _, ok := got[p]; !ok {
					t.Errorf("%q missing from %v", p, got)
				}
			}
		})
	}
	t.Run("checksum", func(t *testing.T) {
		data := buildIndex(2, -1, []rawEntry{{name: "a", mode: file}})
		data[len(data)-1] ^= 1
		if _, err := ParseIndex(context.Background(), data); !errors.Is(err, ErrMalformed) {
			t.Errorf("got %v; want ErrMalformed", err)
		}
	})
}

// TestParseIndexV4Amplification: v4 names are a prefix of the previous name plus a
// suffix, so a long name repeated by tiny entries would cost len(name) per 64 bytes of
// input. Names over maxNameLen are refused, and so is the sum of names over
// maxNameBytes, however small the file.
func TestParseIndexV4Amplification(t *testing.T) {
	long := strings.Repeat("d/", maxNameLen/2-4) + "x"
	if _, err := ParseIndex(context.Background(), buildIndex(4, -1, []rawEntry{{name: long + strings.Repeat("y", 9), mode: 0o100644}})); !errors.Is(err, ErrMalformed) {
		t.Errorf("a name over %d bytes: %v", maxNameLen, err)
	}
	// Each entry strips the 4-byte counter of the previous name and appends the next
	// one: 71 bytes of input for a 4 KiB name, in order.
	count := func(i int) string {
		return string([]byte{byte('a' + i/17576%26), byte('a' + i/676%26), byte('a' + i/26%26), byte('a' + i%26)})
	}
	entries := []rawEntry{{name: long + count(0), mode: 0o100644}}
	n := maxNameBytes/len(long) + 2
	for i := 1; i < n; i++ {
		entries = append(entries, rawEntry{name: count(i), mode: 0o100644, strip: 4})
	}
	data := buildIndex(4, -1, entries)
	_, err := ParseIndex(context.Background(), data)
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "index paths") {
		t.Errorf("%d bytes of index expanding to %d bytes of names: %v", len(data), n*len(long), err)
	}
}

func deflate(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// packEntry is one raw object of a hand-built pack.
type packEntry struct {
	typ  int
	body []byte // inflated
	ref  plumbing.Hash
	ofs  int64 // distance back, for OFS deltas
	id   plumbing.Hash
}

// writePack writes objects/pack/pack-t.{pack,idx} with entries (ids must be unique).
func writePack(t *testing.T, gitDir string, entries []packEntry) {
	t.Helper()
	var pk bytes.Buffer
	pk.WriteString("PACK\x00\x00\x00\x02")
	binary.Write(&pk, binary.BigEndian, uint32(len(entries)))
	offs := make([]int64, len(entries))
	for i, e := range entries {
		offs[i] = int64(pk.Len())
		size := len(e.body)
		c := byte(e.typ<<4) | byte(size&15)
		size >>= 4
		for size > 0 {
			pk.WriteByte(c | 0x80)
			c, size = byte(size&0x7f), size>>7
		}
		pk.WriteByte(c)
		switch e.typ {
		case objREFDelta:
			pk.Write(e.ref[:])
		case objOFSDelta:
			pk.WriteByte(byte(e.ofs)) // < 128 in these tests
		}
		pk.Write(deflate(e.body))
	}
	pk.Write(make([]byte, 20))
	var idx bytes.Buffer
	idx.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	for i := range order { // insertion sort by id
		for j := i; j > 0 && bytes.Compare(entries[order[j]].id[:], entries[order[j-1]].id[:]) < 0; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var fan [256]uint32
	for _, e := range entries {
		for b := int(e.id[0]); b < 256; b++ {
			fan[b]++
		}
	}
	binary.Write(&idx, binary.BigEndian, fan)
	for _, i := range order {
		idx.Write(entries[i].id[:])
	}
	idx.Write(make([]byte, 4*len(entries)))
	for _, i := range order {
		binary.Write(&idx, binary.BigEndian, uint32(offs[i]))
	}
	idx.Write(make([]byte, 40))
	dir := filepath.Join(gitDir, "objects", "pack")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "pack-t.pack"), pk.Bytes(), 0o444)
	os.WriteFile(filepath.Join(dir, "pack-t.idx"), idx.Bytes(), 0o444)
}

// delta encodes a git delta: header sizes, then commands.
func delta(src, dst uint64, cmds ...byte) []byte {
	var b []byte
	for _, v := range []uint64{src, dst} {
		for v >= 0x80 {
			b = append(b, byte(v)|0x80)
			v >>= 7
		}
		b = append(b, byte(v))
	}
	return append(b, cmds...)
}

func TestStoreAttacks(t *testing.T) {
	blob := []byte("hello, world\n")
	id := plumbing.ComputeHash(plumbing.BlobObject, blob)
	other := func(b byte) plumbing.Hash { var h plumbing.Hash; h[0], h[19] = b, b; return h }
	for _, tc := range []struct {
		name    string
		entries []packEntry
		want    plumbing.Hash
		size    int64
		ok      bool
	}{
		{"plain blob", []packEntry{{typ: objBlob, body: blob, id: id}}, id, int64(len(blob)), true},
		{"ofs delta", []packEntry{{typ: objBlob, body: []byte("hello, "), id: other(1)},
			{typ: objOFSDelta, ofs: 0, id: id}}, id, int64(len(blob)), true},
		{"ref delta cycle", []packEntry{{typ: objREFDelta, ref: other(2), body: delta(1, 1, 1, 'x'), id: id},
			{typ: objREFDelta, ref: id, body: delta(1, 1, 1, 'y'), id: other(2)}}, id, 1, false},
		{"self ref delta", []packEntry{{typ: objREFDelta, ref: id, body: delta(1, 1, 1, 'x'), id: id}}, id, 1, false},
		{"huge delta result", []packEntry{{typ: objBlob, body: []byte("a"), id: other(3)},
			{typ: objREFDelta, ref: other(3), body: delta(1, 1<<40, 0x90|0x01, 0, 0), id: id}}, id, 1, false},
		{"copy out of bounds", []packEntry{{typ: objBlob, body: []byte("a"), id: other(3)},
			{typ: objREFDelta, ref: other(3), body: delta(1, 100, 0x91, 0xf0, 100), id: id}}, id, 100, false},
		{"not a blob", []packEntry{{typ: 1, body: blob, id: id}}, id, int64(len(blob)), false},
		{"content that lies about its id", []packEntry{{typ: objBlob, body: []byte("HELLO, WORLD\n"), id: id}}, id, int64(len(blob)), false},
		{"size that lies", []packEntry{{typ: objBlob, body: blob, id: id}}, id, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			git := t.TempDir()
			entries := tc.entries
			if tc.name == "ofs delta" {
				// the delta's base is the entry before it: distance from its offset.
				entries[1].ofs = int64(1 + len(deflate(entries[0].body)))
				entries[1].body = delta(7, uint64(len(blob)), 0x90, 7, byte(len(blob)-7), 'w', 'o', 'r', 'l', 'd', '\n')
			}
			writePack(t, git, entries)
			s, err := OpenStore(git)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			data, err := s.ReadBlob(tc.want, tc.size)
			if tc.ok != (err == nil) {
				t.Fatalf("ReadBlob: %q, %v; want ok=%v", data, err, tc.ok)
			}
			if tc.ok && !bytes.Equal(data, blob) {
				t.Errorf("got %q", data)
			}
		})
	}
}

// TestStoreIgnoresAlternates: the object is only in a directory that
// objects/info/alternates names; it is not found.
func TestStoreIgnoresAlternates(t *testing.T) {
	blob := []byte("secret on the host\n")
	id := plumbing.ComputeHash(plumbing.BlobObject, blob)
	elsewhere := t.TempDir()
	writePack(t, elsewhere, []packEntry{{typ: objBlob, body: blob, id: id}})
	git := t.TempDir()
	os.MkdirAll(filepath.Join(git, "objects", "info"), 0o755)
	os.WriteFile(filepath.Join(git, "objects", "info", "alternates"), []byte(filepath.Join(elsewhere, "objects")+"\n"), 0o644)
	os.Symlink(filepath.Join(elsewhere, "objects", "pack"), filepath.Join(git, "objects", "pack"))
	s, err := OpenStore(git)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if data, err := s.ReadBlob(id, int64(len(blob))); err == nil {
		t.Fatalf("read %q through alternates or a link out of the git directory", data)
	}
}

func FuzzParseIndex(f *testing.F) {
	f.Add(buildIndex(2, -1, []rawEntry{{name: "a", mode: 0o100644}}))
	f.Add(buildIndex(4, -1, []rawEntry{{name: "dir/a", mode: 0o100644}, {name: "b", mode: 0o100644, strip: 1}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		ParseIndex(context.Background(), data)
	})
}

func FuzzPatch(f *testing.F) {
	f.Add([]byte("hello"), delta(5, 3, 0x91, 1, 3))
	f.Fuzz(func(t *testing.T, base, d []byte) {
		if out, err := patch(base, d); err == nil && len(out) > MaxObject {
			t.Fatalf("patch made %d bytes", len(out))
		}
	})
}

// TestValidPath: an index path is taken only as a clean relative path outside .git.
func TestValidPath(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "a/b": true, "a/b.git": true, ".gitignore": true, "x/.github/y": true,
		"": false, ".": false, "..": false, "/a": false, "a/": false, "a//b": false,
		"a/./b": false, "a/../b": false, ".git": false, ".GIT/x": false, "a/.Git": false,
		"a/.git/b": false,
	} {
		if got := validPath(name); got != want {
			t.Errorf("validPath(%q) = %v; want %v", name, got, want)
		}
	}
}

// A parse whose context is done stops with its error: a baseline ended early does not
// wait for a large index to be parsed to its end.
func TestParseIndexCanceled(t *testing.T) {
	var entries []rawEntry
	for i := range 3 * parseStride {
		entries = append(entries, rawEntry{name: fmt.Sprintf("d/f%06d", i), mode: 0o100644})
	}
	data := buildIndex(2, -1, entries)
	got, err := ParseIndex(context.Background(), data)
	if err != nil || len(got) != len(entries) {
		t.Fatalf("the whole index: %d entries, %v", len(got), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ParseIndex(ctx, data); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled parse: %v", err)
	}
}
