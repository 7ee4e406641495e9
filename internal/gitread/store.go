package gitread

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cordonhq/cordon/internal/safefs"

	"github.com/go-git/go-git/v5/plumbing"
)

// Limits of the object reader.
const (
	// MaxObject is the largest object, delta or delta base that is inflated.
	MaxObject = 16 << 20
	// MaxDepth is the longest delta chain followed (git's default is 50).
	MaxDepth = 64
	// MaxWork bounds the bytes a Store inflates and patches over its life, so that a
	// crafted pack costs at most this much however many objects are asked for.
	MaxWork  = 1 << 30
	maxPacks = 1000
)

// Store reads blobs from the object store of one git directory. It never reads
// objects/info/alternates or anything outside the directory.
//
// A Store is safe for concurrent use.
type Store struct {
	dir *safefs.Dir // the git directory

	// mu guards the fields below.
	mu    sync.Mutex
	packs []*pack
	err   error // listing the packs
	ready bool
	work  int64
}

// OpenStore opens the object store of the git directory gitDir (a workspace's .git,
// which must be a directory, not a link).
func OpenStore(gitDir string) (*Store, error) {
	fi, err := os.Lstat(gitDir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrMalformed, gitDir)
	}
	dir, err := safefs.OpenDir(filepath.Dir(gitDir), filepath.Base(gitDir))
	if err != nil {
		return nil, err
	}
	return &Store{dir: dir}, nil
}

// Close releases the store's files.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.packs {
		p.close()
	}
	s.packs = nil
	return s.dir.Close()
}

// spend charges n bytes of work against MaxWork.
func (s *Store) spend(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.work += n; s.work > MaxWork {
		return fmt.Errorf("%w: over the work budget of %d bytes", ErrMalformed, MaxWork)
	}
	return nil
}

// emptyBlob is the id of the empty blob, which git never needs to store.
var emptyBlob = sync.OnceValue(func() plumbing.Hash { return plumbing.ComputeHash(plumbing.BlobObject, nil) })

// ReadBlob returns the content of the blob oid, which must be size bytes long (at most
// MaxObject), after checking that it hashes to oid.
func (s *Store) ReadBlob(oid plumbing.Hash, size int64) ([]byte, error) {
	if size < 0 || size > MaxObject {
		return nil, fmt.Errorf("%w: blob size %d", ErrMalformed, size)
	}
	if size == 0 && oid == emptyBlob() {
		return []byte{}, nil
	}
	data, err := s.loose(oid, size)
	if errors.Is(err, fs.ErrNotExist) {
		data, err = s.packed(oid, size)
	}
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", oid, err)
	}
	if plumbing.ComputeHash(plumbing.BlobObject, data) != oid {
		return nil, fmt.Errorf("object %s: %w", oid, ErrMismatch)
	}
	return data, nil
}

// loose reads objects/xx/yyyy…: zlib of "blob SIZE\x00" and the content.
func (s *Store) loose(oid plumbing.Hash, size int64) ([]byte, error) {
	h := hex.EncodeToString(oid[:])
	name := "objects/" + h[:2] + "/" + h[2:]
	f, err := openRegular(s.dir, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReader(io.LimitReader(f, 2*MaxObject)))
	if err != nil {
		return nil, fmt.Errorf("%w: loose object: %w", ErrMalformed, err)
	}
	defer zr.Close()
	br := bufio.NewReader(io.LimitReader(zr, 64+size+1))
	hdr, err := br.ReadString(0)
	if err != nil || len(hdr) > 32 {
		return nil, fmt.Errorf("%w: loose object header", ErrMalformed)
	}
	typ, n, ok := strings.Cut(strings.TrimSuffix(hdr, "\x00"), " ")
	if got, err := strconv.ParseInt(n, 10, 64); !ok || typ != "blob" || err != nil || got != size {
		return nil, fmt.Errorf("%w: loose object is %q, want a blob of %d bytes", ErrMalformed, hdr, size)
	}
	if err := s.spend(size); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(br)
	if err != nil || int64(len(data)) != size {
		return nil, fmt.Errorf("%w: loose object content", ErrMalformed)
	}
	return data, nil
}

// openRegular opens name in dir, refusing anything but a regular file.
func openRegular(dir *safefs.Dir, name string) (*os.File, error) {
	f, err := dir.Open(name, safefs.NoLimit)
	if errors.Is(err, safefs.ErrNotRegular) {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return f, err
}

// packed finds oid in the packs and reads it.
func (s *Store) packed(oid plumbing.Hash, size int64) ([]byte, error) {
	packs, err := s.listPacks()
	if err != nil {
		return nil, err
	}
	for _, p := range packs {
		off, ok, err := p.find(oid)
		if err != nil {
			return nil, err
		}
		if ok {
			return p.read(s, off, size)
		}
	}
	return nil, ErrNotFound
}

// listPacks opens every objects/pack/*.idx with its .pack, once.
func (s *Store) listPacks() ([]*pack, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready {
		return s.packs, s.err
	}
	s.ready = true
	names, err := s.dir.Names("objects/pack", maxPacks*4)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		s.err = err
		return nil, err
	}
	slices.Sort(names)
	for _, n := range names {
		base, ok := strings.CutSuffix(n, ".idx")
		if !ok || len(s.packs) >= maxPacks {
			continue
		}
		p, err := openPack(s.dir, "objects/pack/"+base)
		if err != nil {
			continue // a broken pack is skipped: its objects are not found
		}
		s.packs = append(s.packs, p)
	}
	return s.packs, nil
}

// inflate decompresses r into at most want bytes, which must be exactly what it holds.
func inflate(r io.Reader, want int64) ([]byte, error) {
	if want < 0 || want > MaxObject {
		return nil, fmt.Errorf("%w: object of %d bytes", ErrMalformed, want)
	}
	zr, err := zlib.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	defer zr.Close()
	var buf bytes.Buffer
	buf.Grow(int(want))
	n, err := io.Copy(&buf, io.LimitReader(zr, want+1))
	if err != nil || n != want {
		return nil, fmt.Errorf("%w: object inflates to %d bytes, want %d", ErrMalformed, n, want)
	}
	return buf.Bytes(), nil
}
