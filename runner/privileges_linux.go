package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

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
func (r *run) dropPrivileges(diff *fsdiff.Result) {
	var t *linux.Tree
	for i := range diff.Changes {
		c := &diff.Changes[i]
		if c.Op != fsdiff.Added && c.Op != fsdiff.Modified || c.Kind == fsdiff.Symlink || c.Kind == fsdiff.Special || c.Kind == fsdiff.Dir {
			continue
		}
		if t == nil {
			var err error
			if t, err = linux.OpenTree(r.plan.Workspace); err != nil {
				r.warnPrivileges(c.Path, err)
				return
			}
			defer t.Close()
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
			if c.Op == fsdiff.Modified {
				sum := sha256.Sum256(p.Capability)
				c.Xattrs = append(c.Xattrs, fsdiff.XattrChange{Op: fsdiff.Deleted, Name: linux.XattrCapability,
					OldSize: len(p.Capability), OldSHA256: hex.EncodeToString(sum[:])})
			}
		}
		what := "its set-id bits"
		switch {
		case p.Capability != nil && p.SetID != 0:
			what = "its file capabilities and set-id bits"
		case p.Capability != nil:
			what = "its file capabilities"
		}
		fmt.Fprintf(r.o.Stderr, "cordon: a command changed %s: removed %s, as a write would have\n", termtext.Line(c.Path), what)
	}
}

// warnPrivileges says that the file rel, which a command changed, may keep
// privileges cordon could not take from it.
func (r *run) warnPrivileges(rel string, err error) {
	r.o.Log.Warn("removing privileges from a changed file", "path", rel, "err", err)
	fmt.Fprintf(r.o.Stderr, "cordon: warning: %s, which a command changed, may keep its set-id bits or file capabilities: %s\n",
		termtext.Line(rel), termtext.Line(err.Error()))
}
