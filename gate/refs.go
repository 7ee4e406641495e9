package gate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
)

// cordon reads the workspace repository's refs itself rather than asking git there:
// git would follow a link the sandbox planted in a writable .git (packed-refs to a
// host file, whose first line then came back in git's error), honour refs/replace
// and shallow (showing the approver other commits than the push sends), and read a
// configuration the sandbox may have written. Reads go through an os.Root on the git
// directory, which refuses every link leading out of it, and open nothing but regular
// files, bounded in size.

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
	root, err := os.OpenRoot(gitDir)
	if err != nil {
		return nil, errRepo
	}
	defer root.Close()
	rr := &repoRefs{refs: map[string]string{}}
	if data, err := readRegular(root, "packed-refs", maxPackedRefs); err == nil {
		rr.parsePacked(data)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, errRepo
	}
	if err := rr.walkLoose(root); err != nil {
		return nil, errRepo
	}
	head, err := readRegular(root, "HEAD", maxRefFile)
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

// readRegular reads name in root if it is a regular file of at most max bytes. It
// opens without blocking, so a fifo swapped in cannot hang cordon.
func readRegular(root *os.Root, name string, max int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Size() > max {
		return nil, errRepo
	}
	return io.ReadAll(io.LimitReader(f, max+1))
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

// walkLoose reads the loose refs under refs/, which win over packed ones. Links are
// not followed (WalkDir does not descend into them; root refuses those leading out).
func (rr *repoRefs) walkLoose(root *os.Root) error {
	n := 0
	return fs.WalkDir(root.FS(), "refs", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && p == "refs" && errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return errRepo
		}
		if n++; n > maxRefs {
			return errRepo
		}
		data, err := readRegular(root, p, maxRefFile)
		if err != nil {
			return err
		}
		if oid := strings.TrimSpace(string(data)); isOID(oid) {
			rr.refs[p] = oid
		}
		return nil
	})
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
// through the root) to dst, for `git config --file`, which reads no include.
func copyConfig(gitDir, dst string) error {
	root, err := os.OpenRoot(gitDir)
	if err != nil {
		return errRepo
	}
	defer root.Close()
	data, err := readRegular(root, "config", maxConfig)
	if errors.Is(err, fs.ErrNotExist) {
		data, err = nil, nil
	}
	if err != nil {
		return errRepo
	}
	return os.WriteFile(dst, data, 0o600)
}
