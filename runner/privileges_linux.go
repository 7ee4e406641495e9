package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/termtext"
)

// dropPrivileges takes from every file a command added or changed in the workspace
// (direct runs: a staged run's apply lands neither) its set-id bits and its file
// capabilities, as the kernel does on a write(2) but not on a write through a shared
// mapping: a sandbox that rewrote a workspace binary carrying cap_net_raw that way
// left the host a binary of its own with the capability (red team rt3). diff's
// changes are made to say so (the file's mode without the bits, the capability
// removed), and so does stderr. A file it cannot disarm (a cordon not root may not
// remove a capability) is warned of.
//
// What no change names is found by a sweep (linux.Tree.DropPrivilegesSince: every
// regular file whose status changed since the run started): of the whole workspace
// when the diff stopped at its bound, and of each nested repository's .git a change
// touched, which the diff does not read into (red team rt4 left a rewritten binary
// there, and past the bound).
func (r *run) dropPrivileges(diff *fsdiff.Result) {
	t, err := linux.OpenTree(r.plan.Workspace)
	if err != nil {
		r.warnPrivileges(".", err)
		return
	}
	defer t.Close()
	var sweep []string
	for i := range diff.Changes {
		c := &diff.Changes[i]
		if c.Op != fsdiff.Deleted {
			if g := nestedGitDir(c.Path); g != "" && !slices.Contains(sweep, g) {
				sweep = append(sweep, g)
			}
		}
		// A rename too: the diff pairs a removed file and an added one of the same
		// bytes, whatever their inodes, so a renamed path can be a rewritten file.
		if c.Op != fsdiff.Added && c.Op != fsdiff.Modified && c.Op != fsdiff.Renamed || c.Kind == fsdiff.Symlink || c.Kind == fsdiff.Special || c.Kind == fsdiff.Dir {
			continue
		}
		p, err := t.DropPrivileges(c.Path)
		if err != nil {
			r.warnPrivileges(c.Path, err)
		}
		if p.SetID == 0 && p.Capability == nil {
			continue
		}
		c.NewMode &^= p.SetID
		if p.Capability != nil {
			c.Xattrs = slices.DeleteFunc(c.Xattrs, func(x fsdiff.XattrChange) bool { return x.Name == linux.XattrCapability })
			if c.Op != fsdiff.Added { // an added path lists all its attributes: none now
				sum := sha256.Sum256(p.Capability)
				c.Xattrs = append(c.Xattrs, fsdiff.XattrChange{Op: fsdiff.Deleted, Name: linux.XattrCapability,
					OldSize: len(p.Capability), OldSHA256: hex.EncodeToString(sum[:])})
			}
		}
		r.saidDropped(c.Path, p)
	}
	if diff.Gap.Incomplete > 0 {
		sweep = []string{"."}
	}
	// Bounded as the host work a command may cause is: ten times the diff's bound.
	max := 10 * int(r.plan.Limits.Diff.Entries)
	for _, dir := range sweep {
		err := t.DropPrivilegesSince(dir, r.start.UnixNano()-sweepSlack, max, r.saidDropped)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			r.warnPrivileges(dir, err)
		}
	}
}

// sweepSlack is how far before the run's start a file's change still counts: file
// times come from a clock that may lag the one the start was read from.
const sweepSlack = int64(20e6)

// nestedGitDir is the .git of a repository other than the workspace's own that the
// workspace path rel is, or lies in ("" for none).
func nestedGitDir(rel string) string {
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		if part == ".git" && i > 0 {
			return strings.Join(parts[:i+1], "/")
		}
	}
	return ""
}

// saidDropped tells stderr that cordon took from the file rel, which a command
// changed, what p says it had.
func (r *run) saidDropped(rel string, p linux.Privileges) {
	what := "its set-id bits"
	switch {
	case p.Capability != nil && p.SetID != 0:
		what = "its file capabilities and set-id bits"
	case p.Capability != nil:
		what = "its file capabilities"
	}
	fmt.Fprintf(r.o.Stderr, "cordon: a command changed %s: removed %s, as a write would have\n", termtext.Line(rel), what)
}

// warnPrivileges says that the file rel, which a command changed, may keep
// privileges cordon could not take from it.
func (r *run) warnPrivileges(rel string, err error) {
	r.o.Log.Warn("removing privileges from a changed file", "path", rel, "err", err)
	fmt.Fprintf(r.o.Stderr, "cordon: warning: %s, which a command changed, may keep its set-id bits or file capabilities: %s\n",
		termtext.Line(rel), termtext.Line(err.Error()))
}
