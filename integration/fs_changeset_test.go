package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// A direct run as root diffs only what the kernel reported changed while the command
// ran (issue 39). Each attack here changes a workspace file in a way a watch of the
// workspace's names alone would not see, or floods the watch; the change must be in
// the run's diff, with the content the file really has, whether the diff came from
// the change set or (visibly, scan.walked) from a walk.
func TestRedChangeSetHiddenWrites(t *testing.T) {
	testutil.RequireRoot(t)
	py := func(code string) string { return "python3 -c '" + code + "'" }
	for _, tc := range []struct {
		name, script string
		setup        func(w *world)
		mayWalk      bool   // the attack may (visibly) force the walk
		walks        string // the attack forces the walk, which says this
	}{
		{name: "mmap write, fd in flight on a socket", script: py(`
import mmap, os, socket
fd = os.open("victim.txt", os.O_RDWR)
m = mmap.mmap(fd, 0)
m[0:3] = b"NEW"
a, b = socket.socketpair(socket.AF_UNIX)
socket.send_fds(a, [b"x"], [fd, a.fileno()])
os.close(fd); m.close()
os._exit(0)`)},
		{name: "write through a hard link in another directory", script: py(`
open("sub/alias", "w").write("NEW content\n")`), setup: func(w *world) {
			mustMkdir(t, filepath.Join(w.ws, "sub"))
			if err := os.Link(filepath.Join(w.ws, "victim.txt"), filepath.Join(w.ws, "sub", "alias")); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "hard link made then written", script: py(`
import os
os.link("victim.txt", "d/alias")
open("d/alias", "r+").write("NEW")
os.unlink("d/alias")`)},
		{name: "directory renamed away, changed, renamed back", script: py(`
import os
os.rename("d", ".hidden")
open(".hidden/inner.txt", "w").write("NEW inner\n")
os.rename(".hidden", "d")
open("victim.txt", "r+").write("NEW")`)},
		{name: "truncate", script: py(`import os; os.truncate("victim.txt", 2)`)},
		{name: "fallocate punch hole, same size", script: py(`
import ctypes, os
fd = os.open("victim.txt", os.O_RDWR)
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate(fd, 3, ctypes.c_long(0), ctypes.c_long(4096))`), setup: func(w *world) {
			mustWrite(t, filepath.Join(w.ws, "victim.txt"), strings.Repeat("old\n", 2048))
		}},
		{name: "xattr", script: py(`import os; os.setxattr("victim.txt", "user.evil", b"1")`)},
		{name: "write then restore mtime", script: py(`
import os
st = os.stat("victim.txt")
open("victim.txt", "r+").write("NEW")
os.utime("victim.txt", ns=(st.st_atime_ns, st.st_mtime_ns))`)},
		// 60,000 creates by one process: cordon's reader keeps up, so this may or may
		// not overflow; TestRT11QueueOverflow forces the overflow and asserts the walk.
		{name: "flood of creates, then write", mayWalk: true, script: py(`
import os
os.mkdir("zflood")  # after victim.txt: an fs.diff itemizes the first 1,000 changes
for i in range(60000):
    open("zflood/%d" % i, "w").close()
open("victim.txt", "r+").write("NEW")`)},
		{name: "more changed paths than a snapshot may record", walks: "more than 1000 paths", script: py(`
import os
os.mkdir("zflood")
for i in range(3000):
    open("zflood/%d" % i, "w").close()
open("victim.txt", "r+").write("NEW")`), setup: func(w *world) {
			w.contract("version: 1\nlimits: {diff: {entries: 1000}}\n")
		}},
		{name: "background writer racing the end", script: `(i=0; while :; do echo NEW$i > victim.txt; i=$((i+1)); done) & sleep 0.2; exit 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			mustWrite(t, filepath.Join(w.ws, "victim.txt"), "old content\n")
			mustMkdir(t, filepath.Join(w.ws, "d"))
			mustWrite(t, filepath.Join(w.ws, "d", "inner.txt"), "old inner\n")
			if tc.setup != nil {
				tc.setup(w)
			}
			if r := w.sh(tc.script); r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			_, diff := runEvents(t, w)
			if diff == nil {
				t.Fatal("no fs.diff")
			}
			t.Logf("scan: %+v", diff.Scan)
			if tc.walks != "" && !strings.Contains(diff.Scan.Walked, tc.walks) {
				t.Errorf("the diff did not walk for %q: %+v", tc.walks, diff.Scan)
			}
			if !diff.Scan.Watched && !tc.mayWalk && tc.walks == "" {
				t.Errorf("the diff walked (%s): the change set was not exercised", diff.Scan.Walked)
			}
			if !diff.Scan.Watched && diff.Scan.Walked == "" {
				t.Error("the diff walked without saying why")
			}
			changed := map[string]string{}
			for _, c := range diff.Changes {
				changed[c.Path] = c.NewSHA256
			}
			for _, p := range []string{"victim.txt", "sub/alias", "d/inner.txt"} {
				data, err := os.ReadFile(filepath.Join(w.ws, p))
				if err != nil {
					continue
				}
				sum := sha256.Sum256(data)
				was := map[string]string{"victim.txt": "old content\n", "sub/alias": "old content\n", "d/inner.txt": "old inner\n"}[p]
				if tc.setup != nil && p == "victim.txt" && strings.HasPrefix(tc.name, "fallocate") {
					was = strings.Repeat("old\n", 2048)
				}
				got, ok := changed[p]
				switch {
				case string(data) == was && !(p == "victim.txt" && strings.HasPrefix(tc.name, "xattr")):
					if ok {
						t.Errorf("%s unchanged but in the diff", p)
					}
				case !ok:
					t.Errorf("%s changed (%q) but is not in the diff (%d changes)", p, firstBytes(data), len(changed))
				case got != "" && got != hex.EncodeToString(sum[:]):
					t.Errorf("%s is in the diff with digest %s, its content has %x", p, got, sum)
				}
			}
		})
	}
}

func firstBytes(b []byte) string { return string(b[:min(len(b), 20)]) }

// A repository moved into place as the command ends is disarmed (renamed) by the live
// watch possibly after the kernel's last event: the diff, taken from the change set,
// still lists every file of it under its new name, as a walk would.
func TestRedChangeSetRepositoryAtTheEnd(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	mustWrite(t, filepath.Join(w.ws, "keep.txt"), "keep\n")
	for round := range 3 {
		dir := "r" + string(rune('0'+round))
		script := "mkdir -p s/objects s/refs && echo 'ref: refs/heads/main' > s/HEAD && echo payload > s/payload && mkdir " + dir + " && mv s " + dir + "/.git"
		if r := w.sh(script); r.code != 0 {
			t.Fatalf("run: %v", r)
		}
		_, diff := runEvents(t, w)
		if diff == nil {
			t.Fatal("no fs.diff")
		}
		listed := map[string]bool{}
		for _, c := range diff.Changes {
			listed[c.Path] = true
		}
		var missed []string
		_ = filepath.Walk(filepath.Join(w.ws, dir), func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				rel, _ := filepath.Rel(w.ws, p)
				if !listed[filepath.ToSlash(rel)] {
					missed = append(missed, rel)
				}
			}
			return nil
		})
		t.Logf("round %d: scan %+v, quarantined %v", round, diff.Scan, diff.Quarantined)
		if len(missed) > 0 || len(diff.Quarantined) == 0 {
			t.Errorf("round %d: files of the disarmed repository not in the diff: %v (quarantined %v)", round, missed, diff.Quarantined)
		}
	}
}
