package gate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/cordonhq/cordon/internal/safefs"
)

// cordon reads the workspace repository's refs itself rather than asking git there:
// git would follow a link the sandbox planted in a writable .git (packed-refs to a
// host file, whose first line then came back in git's error), honour refs/replace
// and shallow (showing the approver other commits than the push sends), and read a
// configuration the sandbox may have written. Reads go through a safefs.Dir on the git
// directory, which refuses every link (on Linux even one that stays inside it), and
// open nothing but regular files, bounded in size.

// Bounds on what is read from the workspace's git directory.
const (
	maxRefFile    = 4 << 10
	maxPackedRefs = 64 << 20
	maxConfig     = 1 << 20
	maxRefs       = 100_000
)

// errRepo is the one message the sandbox gets when its repository cannot be read: no
// content of the repository's files, nor of any file a link in it names, is repeated.
var errRepo = errors.New("the workspace's git repository cannot be read (refs, HEAD or packed-refs missing, too large, not regular files, or links out of .git)")

// repoRefs are a repository's refs as its files say: full name → object id, and HEAD.
type repoRefs struct {
	headRef string // the ref HEAD names, "" when detached
	headOID string
	refs    map[string]string
}

// readRefs reads the refs of the git directory gitDir.
func readRefs(gitDir string) (*repoRefs, error) {
	st, err := os.Lstat(gitDir)
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: a gate pushes from the workspace's own git directory (worktree and submodule pointers are refused)", gitDir)
	}
	dir, err := openGitDir(gitDir)
	if err != nil {
		return nil, errRepo
	}
	defer dir.Close()
	rr := &repoRefs{refs: map[string]string{}}
	if data, err := dir.ReadFile("packed-refs", maxPackedRefs); err == nil {
		rr.parsePacked(data)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, errRepo
	}
	if err := rr.walkLoose(dir); err != nil {
		return nil, errRepo
	}
	head, err := dir.ReadFile("HEAD", maxRefFile)
	if err != nil {
		return nil, errRepo
	}
	line := strings.TrimSpace(string(head))
	if target, ok := strings.CutPrefix(line, "ref:"); ok {
		rr.headRef = strings.TrimSpace(target)
		rr.headOID = rr.refs[rr.headRef]
	} else if isOID(line) {
		rr.headOID = line
	}
	return rr, nil
}

// openGitDir opens the git directory gitDir (its parent, the workspace, is trusted
// as named; gitDir itself must not be a link).
func openGitDir(gitDir string) (*safefs.Dir, error) {
	return safefs.OpenDir(filepath.Dir(gitDir), filepath.Base(gitDir))
}

func (rr *repoRefs) parsePacked(data []byte) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<10)
	for sc.Scan() && len(rr.refs) < maxRefs {
		oid, name, ok := strings.Cut(sc.Text(), " ")
		if ok && isOID(oid) && strings.HasPrefix(name, "refs/") {
			rr.refs[name] = oid
		}
	}
}

// walkLoose reads the loose refs under refs/, which win over packed ones. A link
// anywhere under refs/, or anything but a directory or a regular file, is refused;
// at most maxRefs entries are visited.
func (rr *repoRefs) walkLoose(dir *safefs.Dir) error {
	if _, err := dir.Lstat("refs"); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	n := 0
	var walk func(rel string) error
	walk = func(rel string) error {
		names, err := dir.Names(rel, maxRefs+1)
		if err != nil {
			return err
		}
		for _, name := range names {
			if n++; n > maxRefs {
				return errRepo
			}
			p := rel + "/" + name
			fi, err := dir.Lstat(p)
			switch {
			case err != nil:
				return err
			case fi.IsDir():
				if err := walk(p); err != nil {
					return err
				}
				continue
			case !fi.Mode().IsRegular():
				return errRepo
			}
			data, err := dir.ReadFile(p, maxRefFile)
			if err != nil {
				return err
			}
			if oid := strings.TrimSpace(string(data)); isOID(oid) {
				rr.refs[p] = oid
			}
		}
		return nil
	}
	return walk("refs")
}

// resolve is git's reading of name as a source: an object id, HEAD, a full ref name,
// or a short one (refs/, tags, heads, remotes) that names exactly one ref. It returns the object
// id and the full ref name ("" for HEAD detached and object ids).
func (rr *repoRefs) resolve(name string) (oid, full string, ok bool) {
	switch {
	case isOID(name):
		return name, "", true
	case name == "HEAD":
		return rr.headOID, rr.headRef, rr.headOID != ""
	}
	// git refuses a short name that names more than one ref ("matches more than one"):
	// so does cordon, rather than choose for the approver.
	var hits []string
	for _, f := range []string{name, "refs/" + name, "refs/tags/" + name, "refs/heads/" + name, "refs/remotes/" + name, "refs/remotes/" + name + "/HEAD"} {
		if _, ok := rr.refs[f]; ok && strings.HasPrefix(f, "refs/") && !slices.Contains(hits, f) {
			hits = append(hits, f)
		}
	}
	if len(hits) != 1 {
		return "", "", false
	}
	return rr.refs[hits[0]], hits[0], true
}

// state is HEAD and every ref with its object id, one per line, sorted: two states
// differ exactly when something moved.
func (rr *repoRefs) state() string {
	lines := make([]string, 0, len(rr.refs)+1)
	for name, oid := range rr.refs {
		lines = append(lines, oid+" "+name)
	}
	sort.Strings(lines)
	return "HEAD " + rr.headRef + " " + rr.headOID + "\n" + strings.Join(lines, "\n")
}

// copyConfig copies the repository's configuration file (a regular file, read
// through a safefs.Dir) to dst, for `git config --file`, which reads no include.
func copyConfig(gitDir, dst string) error {
	dir, err := openGitDir(gitDir)
	if err != nil {
		return errRepo
	}
	defer dir.Close()
	data, err := dir.ReadFile("config", maxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		data, err = nil, nil
	}
	if err != nil {
		return errRepo
	}
	return os.WriteFile(dst, data, 0o600)
}
