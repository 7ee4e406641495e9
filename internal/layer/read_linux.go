package layer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// Overlay's own attributes, on the upper directory of an overlay a root cordon
// mounted (trusted.*, which only root reads or writes).
const (
	xattrOpaque   = "trusted.overlay.opaque"
	xattrRedirect = "trusted.overlay.redirect"
	xattrMetacopy = "trusted.overlay.metacopy"
	xattrOrigin   = "trusted.overlay.origin"
)

// Read describes the upper directory upper, holding at most max entries of it: past
// that it stops and returns ErrTooMany, so that what a sandbox made in its upper
// directory never makes cordon's memory grow without bound. The caller guarantees that
// nothing writes it any more (the run that wrote it has ended). An opaque directory
// that is an exact copy of the workspace's (copyOf, a rollback's restoring of a
// directory removed; workspace "": none is taken as one) is no change: not listed,
// nothing below it counted.
func Read(upper, workspace string, max int) (*Set, error) {
	if _, err := os.Lstat(upper); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNotStaged, upper)
		}
		return nil, err
	}
	s := &Set{}
	if workspace != "" {
		up, err := linux.OpenTree(upper)
		if err != nil {
			return nil, fmt.Errorf("reading the staged changes: %w", err)
		}
		defer up.Close()
		lower := openLower(workspace, up, max)
		defer lower.Close()
		s.up, s.lower = up, lower
	}
	if err := s.walk(upper, ".", max); err != nil {
		return nil, err
	}
	s.up, s.lower = nil, nil
	sort.SliceStable(s.Changes, func(i, j int) bool { return s.Changes[i].Path < s.Changes[j].Path })
	return s, nil
}

// walk adds the entries of the upper directory rel (relative to upper), reading its
// names a batch at a time and counting every name against max.
func (s *Set) walk(upper, rel string, max int) error {
	dir := filepath.Join(upper, filepath.FromSlash(rel))
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("reading the staged changes: %w", err)
	}
	var names []string
	for {
		batch, err := f.Readdirnames(1024)
		names = append(names, batch...)
		if s.seen += len(batch); s.seen > max {
			f.Close()
			return fmt.Errorf("%w: more than %d (limits.diff.entries)", ErrTooMany, max)
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("reading the staged changes: %w", err)
		}
	}
	f.Close()
	sort.Strings(names)
	for _, name := range names {
		p := path.Join(rel, name)
		full := filepath.Join(upper, filepath.FromSlash(p))
		fi, err := os.Lstat(full)
		if err != nil {
			return fmt.Errorf("reading the staged changes: %w", err)
		}
		if err := s.entry(upper, p, full, fi, max); err != nil {
			return err
		}
	}
	return nil
}

func (s *Set) entry(upper, p, full string, fi fs.FileInfo, max int) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	for _, x := range []string{xattrRedirect, xattrMetacopy} {
		if v, err := linux.Getxattr(full, x); err != nil || v != "" {
			s.Problems = append(s.Problems, Problem{p, "overlay metadata (" + x + ") the change set cannot represent"})
			return nil
		}
	}
	n := len(s.Changes)
	defer func() {
		if len(s.Changes) > n {
			// Set only by the kernel: a trusted.* attribute, which the sandbox can
			// neither set nor remove.
			v, err := linux.Getxattr(full, xattrOrigin)
			s.Changes[n].Origin = err == nil && v != ""
		}
	}()
	if m := fi.Mode(); m.IsDir() || m.IsRegular() {
		s.metaProblems(p, full, m)
	}
	switch m := fi.Mode(); {
	case m&fs.ModeCharDevice != 0 && st != nil && st.Rdev == 0:
		s.Changes = append(s.Changes, Change{Path: p, Kind: Delete})
	case m.IsDir():
		v, err := linux.Getxattr(full, xattrOpaque)
		if err != nil {
			return err
		}
		if v == "y" && s.copyOfLower(p) {
			return nil
		}
		s.Changes = append(s.Changes, Change{Path: p, Kind: Dir, Mode: uint32(m.Perm()), Opaque: v == "y"})
		return s.walk(upper, p, max)
	case m.IsRegular():
		if st != nil && st.Nlink > 1 {
			// Two names for one file in the change set: each lands as a file of its
			// own (the link is not kept), and the reviewer is told.
			s.Problems = append(s.Problems, Problem{p, fmt.Sprintf("a hard link (%d names): lands as a separate copy", st.Nlink)})
		}
		s.Changes = append(s.Changes, Change{Path: p, Kind: File, Mode: uint32(m.Perm()), Size: fi.Size()})
	case m&fs.ModeSymlink != 0:
		target, err := os.Readlink(full)
		if err != nil {
			return err
		}
		s.Changes = append(s.Changes, Change{Path: p, Kind: Symlink, Target: target})
	default:
		s.Problems = append(s.Problems, Problem{p, "a special file (" + m.Type().String() + "): not landed"})
	}
	return nil
}

// metaProblems names what of the metadata of the staged entry p (at full, with mode
// m) Apply does not land: set-id and sticky bits (never landed), and extended
// attributes but the overlay's own and up to linux.MaxCarriedXattrs user.* ones
// (which land with the file or new directory, as does a file's mtime).
func (s *Set) metaProblems(p, full string, m fs.FileMode) {
	if bits := m & (fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky); bits != 0 {
		s.Problems = append(s.Problems, Problem{p, fmt.Sprintf("set-id or sticky bits (%v): landed without them, as %#o", bits, m.Perm())})
	}
	names, err := linux.Llistxattr(full)
	if err != nil {
		s.Problems = append(s.Problems, Problem{p, "extended attributes unreadable: " + err.Error()})
		return
	}
	var refused []string
	user := 0
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "trusted.overlay."):
		case strings.HasPrefix(n, "user.") && user < linux.MaxCarriedXattrs:
			user++
		default:
			refused = append(refused, strconv.Quote(n))
		}
	}
	if len(refused) > 0 {
		if len(refused) > 8 {
			refused = append(refused[:8], fmt.Sprintf("and %d more", len(refused)-8))
		}
		s.Problems = append(s.Problems, Problem{p, fmt.Sprintf("extended attributes not landed (only up to %d user.* are): %s",
			linux.MaxCarriedXattrs, strings.Join(refused, ", "))})
	}
}

// copyOfLower reports whether the opaque directory p of the upper directory is an
// exact copy of the workspace's (copyOf).
func (s *Set) copyOfLower(p string) bool {
	if s.lower == nil {
		return false
	}
	parent, err := s.up.OpenDir(path.Dir(p))
	if err != nil {
		return false
	}
	defer parent.Close()
	return copyOf(parent, path.Base(p), p, s.lower)
}
