// Package atomicfile is cordon's one way to write a record, key, state or ledger
// file: a reader sees the old content or the new, never a part, and a crash right
// after a call returns loses nothing (the file and its directory entry are synced).
//
// [Write] creates a temporary file exclusively (O_CREAT|O_EXCL, so nothing planted
// under its name is followed or reused) in the same directory as the file, sets its
// mode (and owner) before any content is written, writes, syncs and closes it,
// renames it over the file (a link planted at the file's name is replaced, never
// followed) and syncs the directory. On failure the temporary file is removed.
//
// [WriteUnsynced] is the same replace without the two syncs: a reader still sees the
// old content or the new, never a part, and the process dying (kill -9) at any point
// loses nothing once it returned; only a crash of the machine may bring the old
// content back (or, on some filesystems, leave an empty file). It is for a record
// whose reader is built to survive that, and says how.
//
// [WriteSyncing] is WriteUnsynced with the two syncs run beside the caller, who waits
// for them where it must.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Write replaces path with data, with mode perm (set explicitly: the umask does not
// apply). See the package comment for how.
func Write(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, -1, -1, true)
}

// WriteUnsynced is [Write] without the file's and the directory's sync: atomic for
// every reader and across the writer's own death, not across a machine crash (see the
// package comment).
func WriteUnsynced(path string, data []byte, perm os.FileMode) error {
	return write(path, data, perm, -1, -1, false)
}

// WriteSyncing is [WriteUnsynced] that then makes the file and its directory entry
// durable beside the caller's work: durable waits until they are, and returns why they
// could not be; a second call returns the same. A caller that must not go on before
// the content is durable (what may be written next relies on it surviving a crash)
// calls durable first; until then a machine crash may lose it, as WriteUnsynced's.
func WriteSyncing(path string, data []byte, perm os.FileMode) (durable func() error, err error) {
	if err := WriteUnsynced(path, data, perm); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- syncFile(path) }()
	return sync.OnceValue(func() error { return <-done }), nil
}

// syncFile makes the file at path and its directory entry durable.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return fmt.Errorf("syncing %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// WriteOwned is [Write] with the new file owned by uid:gid, set before the content
// is written and the file renamed into place.
func WriteOwned(path string, data []byte, perm os.FileMode, uid, gid int) error {
	return write(path, data, perm, uid, gid, true)
}

func write(path string, data []byte, perm os.FileMode, uid, gid int, sync bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if uid >= 0 || gid >= 0 {
		if err = f.Chown(uid, gid); err != nil {
			return err
		}
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if sync {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if !sync {
		return nil
	}
	return SyncDir(dir)
}

// Remove deletes path and syncs its directory. A path that does not exist is not an
// error.
func Remove(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir makes a directory's entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
