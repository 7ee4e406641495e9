package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/termtext"
)

// maskedGone disarms what stands where one of the run's placeholders was, when the
// placeholder is no longer the entry the run made or adopted. A placeholder is the
// mount point of a mask in the sandbox; unlinking it on the host (`git clean -fdx`,
// an editor, an `rm`) detaches the mask in every namespace, and renaming it carries
// the mask away: from then on the sandbox could write what its contract denies there
// (an `.envrc` that direnv runs, a `.claude` or `.vscode` whose settings a host tool
// obeys). Whatever is at such a path when a command ends is renamed aside as
// quarantine renames a repository (PATH.cordon-quarantine), and the run says so; a
// path left empty is said too. It returns the workspace-relative paths it renamed.
// The workspace's own entries the plan masks or binds read-only (an .envrc, .git)
// are checked the same way against the identities recordMasks took before the
// sandbox started, by device, inode and birth time only (their change time moves
// with their own use); one found gone or replaced is reported once.
func (r *run) maskedGone() []string {
	if r.rd == nil {
		return nil
	}
	r.masksMu.Lock()
	defer r.masksMu.Unlock()
	ids := r.rd.ids()
	paths := slices.Collect(maps.Keys(r.masks))
	slices.Sort(paths) // parents first: a parent renamed aside takes what is below it
	var out []string
	var gone []string // disarmed directories: what is below them went with them
	for _, p := range paths {
		rel, err := filepath.Rel(r.plan.Workspace, p)
		if err != nil || !filepath.IsLocal(rel) || underAny(p, gone) {
			continue
		}
		now, err := linux.Identify(p)
		what := "the placeholder"
		if want, ok := ids[p]; ok {
			if err == nil && now == want {
				continue
			}
		} else {
			if err == nil && sameEntry(now, r.masks[p]) {
				continue
			}
			what = "the protected entry"
		}
		said := r.masksSaid[p]
		r.saidMaskLocked(p)
		rel = filepath.ToSlash(rel)
		if errors.Is(err, fs.ErrNotExist) {
			if said {
				continue // the live watch said it went, and renamed aside what was there
			}
			fmt.Fprintf(r.o.Stderr, "cordon: warning: %s at %s was removed on the host during the run, and the sandbox's mask on it with it: the sandbox could write it from then on\n", what, termtext.Line(rel))
			r.o.Log.Warn("a masked entry was removed during the run", "path", rel)
			continue
		}
		to, derr := disarmMask(r.plan.Workspace, rel)
		if derr != nil {
			fmt.Fprintf(r.o.Stderr, "cordon: warning: %s at %s was replaced during the run (its mask in the sandbox went with it), and what is there could not be renamed aside: %s\n", what, termtext.Line(rel), termtext.Line(derr.Error()))
			continue
		}
		fmt.Fprintf(r.o.Stderr, "cordon: %s at %s was removed or replaced on the host during the run, and the sandbox's mask on it with it: renamed what is there to %s so that no host tool obeys it\n", what, termtext.Line(rel), termtext.Line(to))
		out = append(out, to)
		gone = append(gone, p)
	}
	return out
}

// disarmMask renames aside what stands at the mask path rel (disarmPath), or, when a
// link or a file stands where one of the directories above it was (a host tool
// removed the directory, the sandbox put a link there), that entry: what is read at
// rel through it is the sandbox's.
func disarmMask(ws, rel string) (string, error) {
	to, err := disarmPath(ws, rel)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return to, err
	}
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		above := path.Join(parts[:i]...)
		if fi, lerr := os.Lstat(filepath.Join(ws, filepath.FromSlash(above))); lerr == nil && !fi.IsDir() {
			return disarmPath(ws, above)
		}
	}
	return "", err
}

// maskKill is why a run was stopped when one of its masks went: the sandbox could
// write the path from then on.
type maskKill struct{ rel string }

func (m *maskKill) Error() string {
	return fmt.Sprintf("the sandbox's mask on %s went during the run (the entry under it was removed or replaced on the host): the sandbox could write it; the run was stopped", termtext.Line(m.rel))
}

// recordMasks records, before the sandbox starts, the identities of the entries the
// run's masks rest on (run.masks): its placeholders (made or adopted, known by
// identity already), and each entry of the workspace the plan masks or binds
// read-only that is there: the user's own, whose removal on the host during the run
// would detach its mask as a placeholder's does.
func (r *run) recordMasks() {
	if r.rd == nil {
		return
	}
	r.masks = r.rd.ids()
	for _, m := range r.plan.Mounts {
		rel, err := filepath.Rel(r.plan.Workspace, m.Path)
		if m.Access == contract.ReadWrite || err != nil || rel == "." || !filepath.IsLocal(rel) {
			continue
		}
		if _, ok := r.masks[m.Path]; ok {
			continue
		}
		if id, err := linux.Identify(m.Path); err == nil {
			r.masks[m.Path] = id
		} // else absent (a placeholder another run keeps is in rd.ids), or unreachable
	}
}

// placeholdersIntact refuses the run when one of its placeholders (or their parents),
// made or adopted, is no longer the entry it recorded: a writer of the workspace
// removed or replaced it since it was placed, before the live watch, which stops a
// run for that, had started. The sandbox's mask would rest on what stands there. The
// run holds what it made (runDir.held), so no other entry has its identity.
func (r *run) placeholdersIntact() error {
	if r.rd == nil {
		return nil
	}
	ids := r.rd.ids()
	for _, p := range slices.Sorted(maps.Keys(ids)) {
		if now, err := linux.Identify(p); err != nil || now != ids[p] {
			rel, _ := filepath.Rel(r.plan.Workspace, p)
			return errdefs.Unavailablef("the placeholder at %s was removed or replaced on the host before the sandbox started: a writer of the workspace races the run; not run", termtext.Line(filepath.ToSlash(rel)))
		}
	}
	return nil
}

// sameEntry reports whether a and b identify the same file: its device and inode,
// and its birth time where the file system keeps one. Without a birth time a file
// removed and another made in its place may take its inode number, and pass.
func sameEntry(a, b linux.FileID) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Birth == b.Birth
}

// saidMaskLocked records that the mask at p was found gone and said so: a later
// check still renames aside what stands there, but does not say again that it went.
// The caller holds masksMu.
func (r *run) saidMaskLocked(p string) {
	if r.masksSaid == nil {
		r.masksSaid = map[string]bool{}
	}
	r.masksSaid[p] = true
}

// underAny reports whether p lies below one of dirs.
func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
