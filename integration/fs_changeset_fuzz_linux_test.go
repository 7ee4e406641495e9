package integration

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// randomChanges makes $2 random changes of the kinds TestRedChangesetRandom lists
// below the workspace's t, seeded with $1.
const randomChanges = `python3 -c '
import ctypes, mmap, os, random, socket, sys
keep, later = socket.socketpair(socket.AF_UNIX), []
r = random.Random(int(sys.argv[1]))
libc = ctypes.CDLL(None, use_errno=True)
def ents(kind=None):
    out = []
    for d, ds, fs in os.walk("t"):
        for n in ds: out.append((os.path.join(d, n), "d"))
        for n in fs:
            p = os.path.join(d, n)
            out.append((p, "l" if os.path.islink(p) else "f"))
    return [p for p, k in out if kind is None or k == kind]
def dirs(): return ["t"] + ents("d")
def newname(): return os.path.join(r.choice(dirs()), "n%d" % r.randrange(40))
for i in range(int(sys.argv[2])):
    op = r.randrange(16)
    files, all_ = ents("f"), ents()
    try:
        if op == 0: open(newname(), "w").write("x%d\n" % r.randrange(9))
        elif op == 1 and files:
            p = r.choice(files)
            if os.path.getsize(p) > 0:
                fd = os.open(p, os.O_RDWR); m = mmap.mmap(fd, 0); m[0:1] = b"M"; m.close(); os.close(fd)
        elif op == 2 and files: os.truncate(r.choice(files), r.randrange(3))
        elif op == 3 and all_: os.chmod(r.choice(all_), r.choice([0o600, 0o755, 0o644, 0o700]))
        elif op == 4 and files: os.setxattr(r.choice(files), "user.k", b"%d" % r.randrange(3))
        elif op == 5 and files:
            p = r.choice(files); st = os.stat(p)
            open(p, "r+").write("R"); os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
        elif op == 6: os.mkdir(newname())
        elif op == 7 and all_: os.rename(r.choice(all_), newname())
        elif op == 8 and len(all_) > 1:
            a, b = r.sample(all_, 2)
            libc.renameat2(-100, a.encode(), -100, b.encode(), 2)
        elif op == 9 and files: os.link(r.choice(files), newname())
        elif op == 10 and files: os.unlink(r.choice(files))
        elif op == 11 and ents("d"): os.rmdir(r.choice(ents("d")))
        elif op == 12: os.symlink("n%d" % r.randrange(5), newname())
        elif op == 13 and files: open(r.choice(files), "a").write("a")
        elif op == 14 and files:
            p = r.choice(files)
            if os.path.getsize(p) > 0:
                fd = os.open(p, os.O_RDWR); m = mmap.mmap(fd, 0)
                socket.send_fds(keep[0], [b"x"], [fd])
                later.append((fd, m))
        elif op == 15 and later:
            fd, m = later.pop(r.randrange(len(later)))
            if os.fstat(fd).st_size > 0: m[0:1] = b"L"
            os.close(fd)
    except (OSError, ValueError):
        pass
for fd, m in later:
    if os.fstat(fd).st_size > 0: m[0:1] = b"E"
    os.close(fd)
socket.send_fds(keep[0], [b"x"], [keep[0].fileno(), keep[1].fileno()])
os._exit(0)
' "$1" "$2"`

// TestRedChangesetRandom: random sequences of the changes a command can make inside
// the workspace (writes, writes through a shared mapping, truncation, modes, xattrs,
// restored times, renames over entries, exchanges, hard links, removals, symbolic
// links), run through cordon; every path whose type, mode, content, link target,
// user xattrs or mtime differs (directories aside) between before and after must be in
// the run's diff.
func TestRedChangesetRandom(t *testing.T) {
	testutil.RequireRoot(t)
	script := randomChanges
	for seed := range seeds() {
		t.Run(strconv.Itoa(seed), func(t *testing.T) {
			w := newWorld(t)
			randomTree(t, w.ws)
			before := treeRecord(t, w.ws)
			if r := w.cordon("", "run", "--", "sh", "-c", script, "sh", strconv.Itoa(seed+1000), "500"); r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			after := treeRecord(t, w.ws)
			_, diff := runEvents(t, w)
			if diff == nil {
				t.Fatal("no fs.diff")
			}
			if !diff.Scan.Watched {
				t.Logf("walked: %s", diff.Scan.Walked)
			}
			diffCovers(t, "", before, after, *diff)
		})
	}
}

// randomTree makes the tree below dir/t that randomChanges starts from.
func randomTree(t *testing.T, dir string) {
	t.Helper()
	for i := range 6 {
		mustWrite(t, filepath.Join(dir, "t", fmt.Sprintf("d%d", i%3), fmt.Sprintf("f%d", i)), fmt.Sprintf("file %d\n", i))
	}
	mustWrite(t, filepath.Join(dir, "t", "top"), "top\n")
	if err := os.Link(filepath.Join(dir, "t", "d0", "f0"), filepath.Join(dir, "t", "d1", "hl")); err != nil {
		t.Fatal(err)
	}
}

// diffCovers checks that d names every path whose record (treeRecord) differs
// between before and after; label prefixes the errors.
func diffCovers(t *testing.T, label string, before, after map[string]string, d audit.FSDiff) {
	t.Helper()
	in := map[string]bool{}
	for _, c := range d.Changes {
		in[c.Path], in[c.OldPath] = true, true
	}
	for p, b := range before {
		if a := after[p]; a != b && !in[p] {
			t.Errorf("%s%s changed (%s -> %s) but is not in the diff (watched %v)", label, p, b, a, d.Scan.Watched)
		}
	}
	for p, a := range after {
		if _, ok := before[p]; !ok && !in[p] {
			t.Errorf("%s%s added (%s) but is not in the diff (watched %v)", label, p, a, d.Scan.Watched)
		}
	}
}

// treeRecord is, for each path below dir/t, what a diff must show a change of.
func treeRecord(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(filepath.Join(dir, "t"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rec := fmt.Sprintf("%o", fi.Mode())
		switch {
		case fi.IsDir():
			return nil // a diff itemizes what directories hold
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			rec += " -> " + target
		case fi.Mode().IsRegular():
			data, _ := os.ReadFile(p)
			x, _ := linux.Getxattr(p, "user.k")
			rec += fmt.Sprintf(" %x x=%q mtime=%d", sha256.Sum256(data), x, fi.ModTime().UnixNano())
		}
		out[filepath.ToSlash(rel)] = rec
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// seeds is how many random sequences TestRedChangesetRandom runs: $CORDON_RED_SEEDS,
// or 12.
func seeds() int {
	if n, err := strconv.Atoi(os.Getenv("CORDON_RED_SEEDS")); err == nil && n > 0 {
		return n
	}
	return 12
}
