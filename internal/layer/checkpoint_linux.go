package layer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// A checkpoint is a copy of a staged session's upper directory, made while the
// overlay is mounted (the upper directory is only read, never written) into a
// directory of cordon's own: layer by layer the same entries, whiteouts and opaque
// directories as the upper directory held, so that the checkpoint over the workspace
// shows the workspace as it was then. Copies are never modified: a file unchanged
// since the previous checkpoint (same inode, same ctime, which user space cannot set)
// is a hard link to that checkpoint's copy, so a checkpoint costs a stat of every
// entry of the upper directory and a copy of what changed since the last one.

// Checkpoint is one copy of an upper directory.
type Checkpoint struct {
	Dir    string
	Copied int // files copied
	Linked int // files unchanged since the previous checkpoint, linked to its copy
	// Problems are entries the checkpoint does not hold (special files, overlay
	// metadata): a rollback to it does not restore them either.
	Problems []Problem
	index    map[string]fileKey // the upper directory's files as copied, by path
}

// fileKey says whether an upper file changed since it was copied.
type fileKey struct {
	ino   uint64
	ctime int64
	size  int64
}

// TakeCheckpoint copies upper into dst (which must not exist), linking to prev's
// copies (prev may be nil) the files unchanged since prev was taken. Entries that
// vanish while it reads (the sandbox writes on) are skipped.
func TakeCheckpoint(upper, dst string, prev *Checkpoint) (*Checkpoint, error) {
	c := &Checkpoint{Dir: dst, index: map[string]fileKey{}}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := c.copyDir(upper, ".", prev); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	return c, nil
}

func (c *Checkpoint) copyDir(upper, rel string, prev *Checkpoint) error {
	f, err := os.Open(filepath.Join(upper, filepath.FromSlash(rel)))
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		p := path.Join(rel, name)
		src := filepath.Join(upper, filepath.FromSlash(p))
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := c.copyEntry(upper, p, src, fi, prev); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

func (c *Checkpoint) copyEntry(upper, p, src string, fi fs.FileInfo, prev *Checkpoint) error {
	dst := filepath.Join(c.Dir, filepath.FromSlash(p))
	st, _ := fi.Sys().(*syscall.Stat_t)
	for _, x := range []string{xattrRedirect, xattrMetacopy} {
		if v, err := linux.Getxattr(src, x); err != nil || v != "" {
			c.Problems = append(c.Problems, Problem{p, "overlay metadata (" + x + ") a checkpoint cannot hold"})
			return nil
		}
	}
	switch m := fi.Mode(); {
	case m&fs.ModeCharDevice != 0 && st != nil && st.Rdev == 0:
		return linux.Whiteout(dst)
	case m.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return err
		}
		if v, err := linux.Getxattr(src, xattrOpaque); err != nil {
			return err
		} else if v == "y" {
			if err := linux.Lsetxattr(dst, xattrOpaque, "y"); err != nil {
				return err
			}
		}
		if err := c.copyDir(upper, p, prev); err != nil {
			return err
		}
		return os.Chmod(dst, m.Perm())
	case m.IsRegular() && st != nil:
		key := fileKey{st.Ino, st.Ctim.Nano(), fi.Size()}
		if prev != nil && prev.index[p] == key && os.Link(filepath.Join(prev.Dir, filepath.FromSlash(p)), dst) == nil {
			c.index[p] = key
			c.Linked++
			return nil
		}
		if err := copyFile(src, dst, m.Perm()); err != nil {
			return err
		}
		c.index[p] = key
		c.Copied++
	case m&fs.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return err
		}
		return os.Symlink(target, dst)
	default:
		c.Problems = append(c.Problems, Problem{p, "a special file (" + m.Type().String() + "): not kept"})
	}
	return nil
}

// copyFile copies the regular file src (never through a link, never blocking on a
// FIFO swapped in) to the new file dst with the permission bits perm, no set-id bits.
func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return errors.New("no longer a regular file")
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Chmod(perm & 0o777)
	}
	return errors.Join(err, out.Close())
}
