package fsdiff

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
)

// nestedRepo is the entry of a nested .git: a special file whose digest covers the
// stat keys of everything git obeys there, at any depth (configuration, commondir and
// gitdir files, attributes, alternates, every hook; submodules' and worktrees' git
// directories under modules/ and worktrees/ alike) or, for a pointer file, its
// content. A rewritten config or hook anywhere in it, or a pointer aimed elsewhere,
// changes it; objects, refs, logs and the index (which git on the host rewrites as it
// works) do not. The walk lists at most [maxGitDirEntries] entries, and no more than
// opts.MaxEntries (limits.diff.entries).
func nestedRepo(r *os.Root, name string, opts Options) *entry {
	alias := opts.devAlias
	fi, err := r.Lstat(name)
	if err != nil {
		return nil
	}
	h := sha256.New()
	fmt.Fprintf(h, "%v\n", keyOf(fi).alias(alias))
	if fi.Mode().IsRegular() && fi.Size() <= 4<<10 {
		if f, err := r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			io.Copy(h, io.LimitReader(f, 4<<10))
			f.Close()
		}
	}
	if fi.IsDir() {
		limit := maxGitDirEntries
		if opts.MaxEntries > 0 {
			limit = min(limit, opts.MaxEntries)
		}
		fingerprintGitDir(r.FS().(gitDirFS), name, h, alias, limit)
	}
	e := &entry{key: keyOf(fi).alias(alias), mode: unixMode(fi.Mode()), size: fi.Size(), kind: Special, hasSum: true}
	h.Sum(e.sum[:0])
	return e
}

// maxGitDirEntries bounds the walk of one nested git directory.
const maxGitDirEntries = 20_000

// gitDirBatch is how many entries of one directory the walk of a git directory lists
// at a time: a directory is never read whole.
const gitDirBatch = 256

// obeyed are the names in a git directory whose content git obeys (or follows).
var obeyed = map[string]bool{"config": true, "config.worktree": true, "commondir": true, "gitdir": true,
	"attributes": true, "alternates": true, "http-alternates": true, "grafts": true}

// gitDirFS is what the walk of a git directory reads through ([os.Root.FS]).
type gitDirFS interface {
	fs.FS
	Lstat(name string) (fs.FileInfo, error)
}

// fingerprintGitDir writes to h the stat key of every entry git obeys in the git
// directory dir: obeyed names and anything under a hooks directory, at any depth, not
// descending into objects, refs, logs or lfs. Links are keyed, never followed. It
// lists at most limit entries in all, gitDirBatch at a time, and then writes
// "truncated".
func fingerprintGitDir(fsys gitDirFS, dir string, h io.Writer, alias [2]uint64, limit int) {
	w := gitDirWalk{fsys: fsys, h: h, alias: alias, left: limit}
	if !w.walk(dir, "") {
		fmt.Fprintf(h, "truncated\n")
	}
}

type gitDirWalk struct {
	fsys  gitDirFS
	h     io.Writer
	alias [2]uint64
	left  int // entries the walk may still list
}

// walk fingerprints the directory p (rel below the git directory, "" for itself),
// and reports false when the bound stopped it.
func (w *gitDirWalk) walk(p, rel string) bool {
	ents, ok := w.list(p)
	for _, d := range ents {
		cp, crel := p+"/"+d.Name(), d.Name()
		if rel != "" {
			crel = rel + "/" + d.Name()
		}
		if d.IsDir() {
			switch d.Name() {
			case "objects":
				for _, a := range []string{"/info/alternates", "/info/http-alternates"} {
					if st, err := w.fsys.Lstat(cp + a); err == nil {
						fmt.Fprintf(w.h, "%s%s %v\n", crel, a, keyOf(st).alias(w.alias))
					}
				}
				continue
			case "refs", "logs", "lfs":
				continue
			case "hooks":
				fmt.Fprintf(w.h, "dir %s\n", crel)
			}
			if !w.walk(cp, crel) {
				return false
			}
			continue
		}
		if !obeyed[d.Name()] && !strings.Contains("/"+crel, "/hooks/") {
			continue
		}
		if st, err := d.Info(); err == nil {
			fmt.Fprintf(w.h, "%s %v\n", crel, keyOf(st).alias(w.alias))
		}
	}
	return ok
}

// list lists the directory p in name order, gitDirBatch entries at a time, charging
// each to w.left; ok is false when entries were left unlisted. A directory that
// cannot be read lists nothing.
func (w *gitDirWalk) list(p string) (ents []fs.DirEntry, ok bool) {
	f, err := w.fsys.Open(p)
	if err != nil {
		return nil, true
	}
	defer f.Close()
	d, isDir := f.(fs.ReadDirFile)
	if !isDir {
		return nil, true
	}
	for {
		n := min(gitDirBatch, w.left)
		if n <= 0 {
			more, _ := d.ReadDir(1) // one past the bound: was anything left?
			ok = len(more) == 0
			break
		}
		batch, err := d.ReadDir(n)
		w.left -= len(batch)
		ents = append(ents, batch...)
		if err != nil || len(batch) == 0 {
			ok = true
			break
		}
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, ok
}
