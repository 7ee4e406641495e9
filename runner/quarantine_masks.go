package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

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
// Only placeholders are known by identity: an existing file the contract masks, and
// removed on the host during the run, is not seen here.
func (r *run) maskedGone() []string {
	if r.rd == nil {
		return nil
	}
	ids := r.rd.ids()
	paths := make([]string, 0, len(ids))
	for p := range ids {
		paths = append(paths, p)
	}
	slices.Sort(paths) // parents first: a parent renamed aside takes what is below it
	var out []string
	var gone []string // disarmed directories: what is below them went with them
	for _, p := range paths {
		rel, err := filepath.Rel(r.plan.Workspace, p)
		if err != nil || !filepath.IsLocal(rel) || underAny(p, gone) {
			continue
		}
		now, err := linux.Identify(p)
		if err == nil && now == ids[p] {
			continue
		}
		rel = filepath.ToSlash(rel)
		if errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(r.o.Stderr, "cordon: warning: the placeholder at %s was removed on the host during the run, and the sandbox's mask on it with it: the sandbox could write it from then on\n", termtext.Line(rel))
			r.o.Log.Warn("a placeholder was removed during the run", "path", rel)
			continue
		}
		to, derr := disarmPath(r.plan.Workspace, rel)
		if derr != nil {
			fmt.Fprintf(r.o.Stderr, "cordon: warning: the placeholder at %s was replaced during the run (its mask in the sandbox went with it), and what is there could not be renamed aside: %s\n", termtext.Line(rel), termtext.Line(derr.Error()))
			continue
		}
		fmt.Fprintf(r.o.Stderr, "cordon: the placeholder at %s was removed or replaced on the host during the run, and the sandbox's mask on it with it: renamed what is there to %s so that no host tool obeys it\n", termtext.Line(rel), termtext.Line(to))
		out = append(out, to)
		gone = append(gone, p)
	}
	return out
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
