package runner

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/cordonhq/cordon/audit/fsdiff"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/safefs"
	"github.com/cordonhq/cordon/internal/termtext"
)

// quarantineSuffix is appended to what quarantine renames.
const quarantineSuffix = ".cordon-quarantine"

// quarantine disarms every git repository a change created or changed inside the
// workspace, other than the workspace's own, and every contract (cordon.yaml) written
// below the workspace's root: the host's git would obey its configuration
// (core.fsmonitor, core.pager, hooks, aliases) the next time anyone ran git there.
//   - a nested .git (directory or pointer file) is renamed .git.cordon-quarantine;
//   - a bare repository (a directory whose HEAD git would take for one: isBare; git
//     runs inside it as in a repository) has its HEAD renamed HEAD.cordon-quarantine,
//     which is all git needs to stop seeing one;
//   - a cordon.yaml is renamed cordon.yaml.cordon-quarantine: a run started in its
//     directory would read it as its contract.
//
// And what stands where one of the run's placeholders was, once the host removed or
// replaced it: the sandbox's mask went with it (maskedGone). Before all that, every
// file the change added or changed loses its set-id bits and file capabilities
// (dropPrivileges).
//
// It returns the workspace-relative paths it renamed, with those the live watch
// (quarantine_linux.go) renamed the moment they appeared.
func (r *run) quarantine(diff *fsdiff.Result) []string {
	r.dropPrivileges(diff)
	out := append(r.takeLive(), r.maskedGone()...)
	seen := map[string]bool{}
	for _, c := range diff.Changes {
		if c.Op == fsdiff.Deleted {
			continue
		}
		target := ""
		switch base := path.Base(c.Path); {
		case c.Path == ".git" || strings.HasPrefix(c.Path, ".git/"):
			continue // the workspace's own, protected by the contract
		case base == ".git":
			target = c.Path // made, moved there, or changed: a rewritten config or hook, a pointer aimed elsewhere
		case base == "HEAD" || base == "config" || base == "commondir" || base == "objects" || base == "refs":
			if dir := path.Dir(c.Path); r.bareRepository(dir) {
				target = path.Join(dir, "HEAD")
			}
		case base == contract.ContractName:
			// A contract below the workspace's own (which is read-only) would be the
			// next run's when one starts in that directory.
			target = c.Path
		}
		if target == "" || seen[target] || insideGitDir(target) {
			continue
		}
		seen[target] = true
		if r.disarm(target) {
			out = append(out, target)
		}
	}
	if diff.Gap.Incomplete > 0 {
		// The diff stopped at a bound: a repository in what it did not record is
		// not in Changes. The sweep finds it by name, listing what the diff did not.
		out = append(out, sweepRepositories(r.plan.Workspace, r.start.UnixNano())...)
	}
	return out
}

// insideGitDir reports whether p lies inside a .git (or one already quarantined),
// which the rename of that .git takes care of.
func insideGitDir(p string) bool {
	parts := strings.Split(p, "/")
	for _, d := range parts[:len(parts)-1] {
		if d == ".git" || d == ".git"+quarantineSuffix {
			return true
		}
	}
	return false
}

// bareRepository reports whether the workspace directory rel holds a HEAD git would
// take for one (headLike).
func (r *run) bareRepository(rel string) bool {
	return isBare(filepath.Join(r.plan.Workspace, filepath.FromSlash(rel)))
}

// isBare reports whether dir holds a HEAD git could take for a repository's. Git sees
// a repository in a directory whose HEAD is a link, or a file starting "ref:" or with
// an object id (either case, whatever follows), with objects and refs it can reach any
// way (links included) or through a commondir. cordon does not mirror that test: a
// HEAD that is not a plain file, or that holds such a line, or that sits next to an
// objects, refs or commondir entry of any kind, counts, whatever it holds at the
// moment (it may be written later). Renaming it is enough to end the repository.
func isBare(dir string) bool {
	p := filepath.Join(dir, "HEAD")
	st, err := os.Lstat(p)
	switch {
	case err != nil || st.IsDir():
		return false
	case !st.Mode().IsRegular():
		return true // a link, a fifo fed later, …
	}
	for _, n := range []string{"objects", "refs", "commondir"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			return true
		}
	}
	d, err := safefs.OpenDir(dir, ".")
	if err != nil {
		return false
	}
	defer d.Close()
	f, err := d.Open("HEAD", safefs.NoLimit)
	switch {
	case errors.Is(err, safefs.ErrNotRegular) || errors.Is(err, syscall.ELOOP):
		return true // made a link, a fifo, … since the Lstat
	case err != nil:
		return false
	}
	defer f.Close()
	buf := make([]byte, 64)
	n, _ := f.Read(buf)
	line := strings.TrimLeft(string(buf[:n]), " \t")
	if strings.HasPrefix(line, "ref:") {
		return true
	}
	hex := 0
	for hex < len(line) && strings.IndexByte("0123456789abcdefABCDEF", line[hex]) >= 0 {
		hex++
	}
	return hex >= 40
}

// disarm renames the workspace path rel (disarmPath), following no link, and says so;
// it reports whether it did. A rel already gone (disarmed as it appeared) is no error.
func (r *run) disarm(rel string) bool {
	r.qMu.Lock()
	defer r.qMu.Unlock()
	to, err := disarmPath(r.plan.Workspace, rel)
	switch {
	case err == nil && path.Base(rel) == contract.ContractName:
		fmt.Fprintf(r.o.Stderr, "cordon: a command wrote a contract in the workspace: renamed %s to %s so that no later run reads it\n", termtext.Line(rel), termtext.Line(to))
		return true
	case err == nil:
		fmt.Fprintf(r.o.Stderr, "cordon: a command made a new git repository in the workspace: renamed %s to %s so that no git on the host obeys it\n", termtext.Line(rel), termtext.Line(to))
		return true
	case errors.Is(err, os.ErrNotExist):
		return false
	}
	r.o.Log.Warn("quarantining a nested git repository", "path", rel, "err", err)
	fmt.Fprintf(r.o.Stderr, "cordon: warning: could not quarantine the git repository at %s: %s\n", termtext.Line(rel), termtext.Line(err.Error()))
	return false
}

// disarmPath renames ws/rel to rel.cordon-quarantine (or -2 … -9 when that is
// taken), following no link, and returns the new relative path.
//
// The sandbox can make all of those names first (they are workspace paths): past
// them, a name with 65 random bits, which it cannot guess, is tried. The numbered
// names are few because each one the sandbox took costs the live watch a rename
// tried per disarm: a sandbox that takes them for every contract it writes holds the
// watch back by as many renames per event.
func disarmPath(ws, rel string) (string, error) {
	p := filepath.Join(ws, filepath.FromSlash(rel))
	names := make([]string, 0, numberedQuarantine+maxRandomQuarantine)
	for i := 1; i <= numberedQuarantine+maxRandomQuarantine; i++ {
		name := filepath.Base(p) + quarantineSuffix
		switch {
		case i > numberedQuarantine:
			name += "-" + rand.Text()[:13]
		case i > 1:
			name += "-" + strconv.Itoa(i)
		}
		names = append(names, name)
	}
	// The directory is reached once for all the names: a sandbox that takes them in a
	// deep directory would otherwise hold the live watch back a walk of it for each.
	name, err := linux.RenameNoLinksFirst(p, names)
	if err != nil {
		return "", err
	}
	return path.Join(path.Dir(rel), name), nil
}

// numberedQuarantine is how many numbered quarantine names disarmPath tries (the
// first without a number); maxRandomQuarantine how many random ones once those are
// taken.
const (
	numberedQuarantine  = 9
	maxRandomQuarantine = 3
)
