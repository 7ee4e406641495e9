package layer

import (
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// A checkpoint is a copy of a staged session's upper directory, made while the
// overlay is mounted (the upper directory is only read, never written) into a
// directory of cordon's own: the same entries, whiteouts and opaque directories as
// the upper directory held, so that the checkpoint over the workspace shows the
// workspace as it was then. The sandbox writes the upper directory meanwhile, and may
// swap any directory of it for a link: it is read as a [linux.Tree], following none.
// Copies are never modified: a file unchanged since the previous checkpoint (same
// inode, same ctime, which user space cannot set) is a hard link to that checkpoint's
// copy, so a checkpoint costs a stat of every entry of the upper directory and a copy
// of what changed since the last one. A copy keeps the entry's extended attributes
// (the overlay's own aside) and a file's modification time: a rollback gives them
// back (an attribute's change and a touch change the ctime too).

// Checkpoint is one copy of an upper directory.
type Checkpoint struct {
	Dir    string
	Copied int // files copied
	Linked int // files unchanged since the previous checkpoint, linked to its copy
	// Problems are entries the checkpoint does not hold as they are (special files,
	// overlay metadata): a rollback to it does not restore them so. A file of many
	// names is held as one copy of many names, and restored so.
	Problems []Problem
	index    map[uint64]fileKey // the upper directory's files as copied, by pathKey
	max      int                // entries the checkpoint may hold (limits.diff.entries)
	lower    *lowerView         // the workspace, while the checkpoint is taken (copyOf)
	omitted  int                // problems past maxProblems, not kept
	seen     int                // entries counted against max
	// names holds, for an upper file of more than one name, the copy of it this
	// checkpoint made last: its other names are links to that copy, so a file of
	// many names costs one copy, not one per name.
	names map[uint64]linkedCopy
	attrs int // extended attributes kept (checkpointAttrsMax)
}

// checkpointAttrsMax is the most extended attributes one checkpoint keeps: each costs
// a read and a write, before every command, of directories made anew each time, and
// the sandbox sets them at will (red team rt4: 5,000 directories of 128 made each
// checkpoint take 20 s). Past it, what is not kept is a problem: a rollback to the
// checkpoint does not restore it.
const checkpointAttrsMax = 16384

// linkedCopy is a checkpoint's copy of a file of many names.
type linkedCopy struct {
	dst string
	key fileKey
}

// pathSeed keys pathKey, afresh in each process.
var pathSeed = maphash.MakeSeed()

// pathKey is what a checkpoint's index knows a path by: a hash, not the path, so that
// the index of each of the checkpoints a session keeps costs a few words per file,
// however long the sandbox made its paths. Two paths of one hash are harmless: an
// entry is used only for a file whose inode, change time and size are the indexed
// ones, which is the same file (under one of its names) unchanged since.
func pathKey(p string) uint64 { return maphash.String(pathSeed, p) }

// fileKey says whether an upper file changed since it was copied.
type fileKey struct {
	ino   uint64
	ctime int64
	size  int64
}

// TakeCheckpoint copies upper into dst (which must not exist, or be an empty
// directory: the caller may make it with other credentials than the copy's), linking to prev's
// copies (prev may be nil) the files unchanged since prev was taken. Entries that
// vanish while it reads (the sandbox writes on) are skipped, and so is an opaque
// directory that is an exact copy of the workspace's (copyOf; workspace "": none is
// taken as one): the checkpoint over the workspace shows the workspace's there. It
// holds at most max entries (limits.diff.entries, as a staged change set): past that it stops with
// [ErrTooMany], what it copied left for the caller to remove. The sandbox fills the
// upper directory, and the checkpoint's index and the names it reads, a batch of a
// directory at a time, are cordon's memory on the host.
func TakeCheckpoint(upper, workspace, dst string, prev *Checkpoint, max int) (*Checkpoint, error) {
	t, err := linux.OpenTree(upper)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer t.Close()
	lower := openLower(workspace, t, max)
	defer lower.Close()
	root, err := t.OpenDir(".")
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer root.Close()
	c := &Checkpoint{Dir: dst, index: map[uint64]fileKey{}, names: map[uint64]linkedCopy{}, max: max, lower: lower}
	defer func() { c.lower = nil }()
	if err := os.Mkdir(dst, 0o700); errors.Is(err, fs.ErrExist) {
		if err := emptyDir(dst); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := c.copyDir(root, ".", prev); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	if c.omitted > 0 {
		c.Problems = append(c.Problems, Problem{"…", fmt.Sprintf("%d more entries not kept as they are", c.omitted)})
	}
	return c, nil
}

// maxProblems is how many of its problems a checkpoint keeps; the rest are counted.
const maxProblems = 100

// problem adds p to c's problems, or counts it past maxProblems.
func (c *Checkpoint) problem(p Problem) {
	if len(c.Problems) < maxProblems {
		c.Problems = append(c.Problems, p)
	} else {
		c.omitted++
	}
}

// emptyDir refuses dst unless it is an empty directory (not a link to one).
func emptyDir(dst string) error {
	d, err := os.OpenFile(dst, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	defer d.Close()
	if names, _ := d.Readdirnames(1); len(names) > 0 {
		return fmt.Errorf("checkpoint: %s is not empty", dst)
	}
	return nil
}

// namesBatch is how many of a directory's names a walk of an upper directory holds at
// once.
const namesBatch = 1024

// maxPathLen is the longest path of an upper directory a checkpoint or a rollback
// reads (PATH_MAX: a checkpoint's copy of a longer one cannot be made), and
// pathBytesPerEntry what the paths a rollback lists may take on average, per entry of
// its bound: a chain of directories of long names, each a level deeper, makes the
// paths' bytes grow with the square of its depth.
const (
	maxPathLen        = 4096
	pathBytesPerEntry = 256
)

// ErrTooLong means the upper directory holds a path longer than a checkpoint or a
// rollback reads, or more bytes of paths than a rollback lists.
var ErrTooLong = errors.New("the staged workspace's paths are too long")

// tooLong is ErrTooLong for the path p.
func tooLong(p string) error {
	return fmt.Errorf("%w: %.64q… (%d bytes; at most %d, and %d per entry on average)", ErrTooLong, p, len(p), maxPathLen, pathBytesPerEntry)
}

// tooMany is ErrTooMany for a bound of max entries.
func tooMany(max int) error {
	return fmt.Errorf("%w: more than %d (limits.diff.entries)", ErrTooMany, max)
}

// copyDir copies the entries of the upper directory d, at rel, counting each against
// c.max. The order is the directory's: a copy needs none.
func (c *Checkpoint) copyDir(d *linux.Dir, rel string, prev *Checkpoint) error {
	return d.EachNames(namesBatch, func(names []string) error {
		if c.seen += len(names); c.seen > c.max {
			return tooMany(c.max)
		}
		for _, name := range names {
			p := path.Join(rel, name)
			if err := c.copyEntry(d, name, p, prev); err != nil && !errors.Is(err, fs.ErrNotExist) &&
				!errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.ENOTDIR) {
				if errors.Is(err, ErrTooMany) {
					return err
				}
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		return nil
	})
}

// copyEntry copies the entry name of d (p in the upper directory). An entry the
// sandbox swapped meanwhile (a link where a directory was) is not reached.
func (c *Checkpoint) copyEntry(d *linux.Dir, name, p string, prev *Checkpoint) error {
	st, err := d.Lstat(name)
	if err != nil {
		return err
	}
	dst := filepath.Join(c.Dir, filepath.FromSlash(p))
	perm := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFCHR:
		if st.Rdev != 0 {
			break
		}
		return linux.Whiteout(dst)
	case syscall.S_IFDIR:
		if isCopy(d, name, p, c.lower) {
			return nil
		}
		sub, err := d.Sub(name)
		if err != nil {
			return err
		}
		defer sub.Close()
		return c.copySubdir(sub, p, dst, perm, prev)
	case syscall.S_IFREG:
		return c.copyRegular(d, name, p, dst, fileKey{st.Ino, st.Ctim.Nano(), st.Size}, uint64(st.Nlink), perm, prev)
	case syscall.S_IFLNK:
		target, err := d.Readlink(name)
		if err != nil {
			return err
		}
		if err := os.Symlink(target, dst); err != nil {
			return err
		}
		c.keepAttrs(d, name, p, dst)
		return nil
	}
	c.problem(Problem{p, "a special file: not kept"})
	return nil
}

// copyRegular copies the regular file name of d (p: key, of nlink names) to dst, or links
// dst to a copy already made of it: prev's, when the file is unchanged since, or this
// checkpoint's, when the file has another name copied already.
func (c *Checkpoint) copyRegular(d *linux.Dir, name, p, dst string, key fileKey, nlink uint64, perm fs.FileMode, prev *Checkpoint) error {
	linked := prev != nil && prev.index[pathKey(p)] == key && os.Link(filepath.Join(prev.Dir, filepath.FromSlash(p)), dst) == nil
	if !linked && nlink > 1 {
		// A link to a file changed since, or one at its most names, fails: copied.
		l, ok := c.names[key.ino]
		linked = ok && l.key == key && os.Link(l.dst, dst) == nil
	}
	if linked {
		c.Linked++
	} else {
		if err := copyFile(d, name, dst, perm); err != nil {
			return err
		}
		c.keepAttrs(d, name, p, dst)
		c.Copied++
	}
	c.index[pathKey(p)] = key
	if nlink > 1 {
		c.names[key.ino] = linkedCopy{dst, key}
	}
	return nil
}

// copySubdir copies the upper directory sub (p) to dst: opaque as it is, and with
// overlay metadata a checkpoint cannot hold reported instead (the overlay is mounted
// with it off). A file's metadata (metacopy) cannot be there either: it is off too,
// and only the kernel writes trusted.* attributes.
func (c *Checkpoint) copySubdir(sub *linux.Dir, p, dst string, perm fs.FileMode, prev *Checkpoint) error {
	if v, err := sub.Getxattr(xattrRedirect); err != nil || v != "" {
		c.problem(Problem{p, "overlay metadata (" + xattrRedirect + ") a checkpoint cannot hold"})
		return nil
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	if v, err := sub.Getxattr(xattrOpaque); err != nil {
		return err
	} else if v == "y" {
		if err := linux.Lsetxattr(dst, xattrOpaque, "y"); err != nil {
			return err
		}
	}
	if err := c.copyDir(sub, p, prev); err != nil {
		return err
	}
	// Its attributes once its entries are made: a default ACL among them would be
	// inherited by the copies, which are to hold their own.
	if c.attrs <= checkpointAttrsMax {
		attrs, _, err := sub.OwnXattrs(xattrNamesMax, xattrBytesMax)
		c.setAttrs(p, dst, attrs, err)
	}
	return os.Chmod(dst, perm)
}

// keepAttrs gives dst, the checkpoint's copy of the entry name of d (p), the
// entry's extended attributes (see setAttrs).
func (c *Checkpoint) keepAttrs(d *linux.Dir, name, p, dst string) {
	if c.attrs > checkpointAttrsMax {
		return // past the bound: not even read
	}
	attrs, _, err := d.Xattrs(name, xattrNamesMax, xattrBytesMax)
	c.setAttrs(p, dst, attrs, err)
}

// setAttrs sets on dst, the checkpoint's copy of p, the extended attributes attrs
// that p has (err: they could not be read), the overlay's own aside (the
// opaque mark is the checkpoint's own business: copySubdir). What it cannot keep is a
// problem of the checkpoint: a rollback to it would not restore it.
func (c *Checkpoint) setAttrs(p, dst string, attrs []linux.Xattr, err error) {
	if err != nil {
		c.problem(Problem{p, "extended attributes not kept: " + err.Error()})
		return
	}
	for _, a := range entryAttrs(attrs) {
		if privilegeAttr(a.Name) {
			continue // a rollback restores none
		}
		if c.attrs++; c.attrs > checkpointAttrsMax {
			if c.attrs == checkpointAttrsMax+1 {
				c.problem(Problem{p, fmt.Sprintf("extended attributes not kept, here and past: more than the %d a checkpoint keeps", checkpointAttrsMax)})
			}
			return
		}
		if err := linux.Lsetxattr(dst, a.Name, a.Value); err != nil {
			c.problem(Problem{p, fmt.Sprintf("extended attribute %s not kept: %v", a.Name, attrErr(err))})
		}
	}
}

// copyFile copies the regular file name of d (opened without following a link or
// blocking on a FIFO swapped in) to the new file dst with the permission bits perm,
// no set-id bits, its holes kept, and its modification time.
func copyFile(d *linux.Dir, name, dst string, perm fs.FileMode) error {
	in, err := d.Open(name)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return errors.New("no longer a regular file")
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	err = linux.CopySparse(out, in)
	if err == nil {
		err = out.Chmod(perm & 0o777)
	}
	if err == nil {
		// Its modification time: a rollback gives the file the copy's.
		err = linux.SetMtime(out, fi.ModTime())
	}
	return errors.Join(err, out.Close())
}

// Unchanged lists the files of the upper directory upper that are what they were
// when c was taken (same inode, same ctime): a rollback to c need not read them. It
// reads at most max entries of upper (past that, [ErrTooMany]), a batch of a
// directory's names at a time, and none below an opaque directory that is an exact
// copy of the workspace's (copyOf; workspace "": none is taken as one).
func (c *Checkpoint) Unchanged(upper, workspace string, max int) (map[string]bool, error) {
	t, err := linux.OpenTree(upper)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	lower := openLower(workspace, t, max)
	defer lower.Close()
	root, err := t.OpenDir(".")
	if err != nil {
		return nil, err
	}
	defer root.Close()
	same := map[string]bool{}
	seen := 0
	var walk func(d *linux.Dir, rel string) error
	walk = func(d *linux.Dir, rel string) error {
		return d.EachNames(namesBatch, func(names []string) error {
			if seen += len(names); seen > max {
				return tooMany(max)
			}
			for _, name := range names {
				p := path.Join(rel, name)
				if len(p) > maxPathLen {
					return tooLong(p)
				}
				st, err := d.Lstat(name)
				if err != nil {
					continue
				}
				switch st.Mode & syscall.S_IFMT {
				case syscall.S_IFREG:
					if key, ok := c.index[pathKey(p)]; ok && key == (fileKey{st.Ino, st.Ctim.Nano(), st.Size}) {
						same[p] = true
					}
				case syscall.S_IFDIR:
					if isCopy(d, name, p, lower) {
						continue
					}
					if sub, err := d.Sub(name); err == nil {
						err = walk(sub, p)
						sub.Close()
						if err != nil {
							return err
						}
					}
				}
			}
			return nil
		})
	}
	if err := walk(root, "."); err != nil && (errors.Is(err, ErrTooMany) || errors.Is(err, ErrTooLong)) {
		return nil, err
	}
	return same, nil
}
