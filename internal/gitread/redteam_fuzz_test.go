package gitread

import (
	"context"
	"crypto/sha1"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// FuzzParseIndexBody fuzzes the index body with a valid checksum appended, so that
// mutations get past the trailer check (FuzzParseIndex's mutants almost never do).
func FuzzParseIndexBody(f *testing.F) {
	for _, seed := range [][]byte{
		buildIndex(2, -1, []rawEntry{{name: "a", mode: 0o100644}}),
		buildIndex(3, -1, []rawEntry{{name: "a", mode: 0o100644, flags: 0x4000}}),
		buildIndex(4, -1, []rawEntry{{name: "dir/a", mode: 0o100644}, {name: "b", mode: 0o100644, strip: 1}}),
	} {
		f.Add(seed[:len(seed)-sha1.Size])
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := sha1.Sum(body)
		ParseIndex(context.Background(), append(body[:len(body):len(body)], sum[:]...))
	})
}

// FuzzStorePack fuzzes a pack and its idx, asking for the idx's first object id.
func FuzzStorePack(f *testing.F) {
	blob := []byte("hello, world\n")
	id := plumbing.ComputeHash(plumbing.BlobObject, blob)
	dir := f.TempDir()
	writePack(&testing.T{}, dir, []packEntry{{typ: objBlob, body: blob, id: id}})
	pk, _ := os.ReadFile(filepath.Join(dir, "objects/pack/pack-t.pack"))
	idx, _ := os.ReadFile(filepath.Join(dir, "objects/pack/pack-t.idx"))
	f.Add(pk, idx, int64(len(blob)))
	f.Fuzz(func(t *testing.T, pk, idx []byte, size int64) {
		g := t.TempDir()
		os.MkdirAll(filepath.Join(g, "objects/pack"), 0o755)
		os.WriteFile(filepath.Join(g, "objects/pack/pack-f.pack"), pk, 0o644)
		os.WriteFile(filepath.Join(g, "objects/pack/pack-f.idx"), idx, 0o644)
		var oid plumbing.Hash
		if len(idx) >= idxHeader+20 {
			copy(oid[:], idx[idxHeader:])
		}
		s, err := OpenStore(g)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if data, err := s.ReadBlob(oid, size); err == nil && plumbing.ComputeHash(plumbing.BlobObject, data) != oid {
			t.Fatal("unverified content")
		}
	})
}

// FuzzStoreLoose fuzzes a loose object file.
func FuzzStoreLoose(f *testing.F) {
	blob := []byte("hello, world\n")
	f.Add(deflate(append([]byte("blob 13\x00"), blob...)), int64(len(blob)))
	id := plumbing.ComputeHash(plumbing.BlobObject, blob)
	h := id.String()
	f.Fuzz(func(t *testing.T, obj []byte, size int64) {
		g := t.TempDir()
		os.MkdirAll(filepath.Join(g, "objects", h[:2]), 0o755)
		os.WriteFile(filepath.Join(g, "objects", h[:2], h[2:]), obj, 0o644)
		s, err := OpenStore(g)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.ReadBlob(id, size)
	})
}
