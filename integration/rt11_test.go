package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Red team 11 (rt11) against the change set of a direct one-command run as root
// (issue 39): the diff reads again only what the kernel reported changed, and the
// command starts behind a barrier while the baseline is read. Each attack changes a
// workspace file; the change must be in the run's fs.diff with the content the file
// really has, or the diff must have walked and said why.

// rt11Changed is the diff's path -> new digest ("" for a change with none).
func rt11Changed(d *audit.FSDiff) map[string]string {
	got := map[string]string{}
	for _, c := range d.Changes {
		got[c.Path] = c.NewSHA256
	}
	return got
}

// rt11AssertSeen fails unless rel, whose content was was before the run, is either
// unchanged or in the diff with its real digest.
func rt11AssertSeen(t *testing.T, w *world, d *audit.FSDiff, rel, was string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(w.ws, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := rt11Changed(d)[rel]
	sum := sha256.Sum256(data)
	switch {
	case string(data) == was:
		t.Logf("%s unchanged", rel)
	case !ok:
		t.Errorf("%s changed (%d bytes, %q…) but is not in the diff (scan %+v, %d changes)", rel, len(data), firstBytes(data), d.Scan, len(d.Changes))
	case got != "" && got != hex.EncodeToString(sum[:]):
		t.Errorf("%s is in the diff with digest %s, its content has %x", rel, got, sum)
	}
}

// TestRT11CoreDumpDuringBaseline: the kernel writes a crashing process's core file
// into its working directory (core_pattern "core", the kernel's default) with no
// system call of the command's: the barrier holds none. The command raises its core
// limit (setrlimit: not held), crashes a child in the last directory the baseline
// reads, and the kernel replaces bulk/63/core (it unlinks an existing one first)
// while the baseline is still being read. The baseline then records the dump as the
// old content, and the diff, which reads the path again, finds it unchanged. BROKE
// (the diff was empty); fixed: process 1 gives a command with a barrier RLIMIT_CORE 0,
// soft and hard, which it has no capability to raise.
func TestRT11CoreDumpDuringBaseline(t *testing.T) {
	testutil.RequireRoot(t)
	pattern, _ := os.ReadFile("/proc/sys/kernel/core_pattern")
	t.Logf("core_pattern %q", pattern) // a pipe's helper may write into the directory too (apport)
	w := newWorld(t)
	sharedBulk(t, w)
	const was = "old core\n"
	mustWrite(t, filepath.Join(w.ws, "bulk", "63", "core"), was)
	t.Cleanup(func() { os.Remove(filepath.Join(w.ws, "bulk", "63", "core")) })
	r := w.cordon("", "run", "-v", "--", "sh", "-c", `cd bulk/63 && ulimit -c unlimited ; sh -c 'kill -SEGV $$'; echo done`)
	if !strings.Contains(r.stdout, "done") {
		t.Fatalf("run: %v", r)
	}
	if heldCalls(r.stderr) < 0 {
		t.Fatalf("the run had no barrier:\n%s", r.stderr)
	}
	_, d := runEvents(t, w)
	if d == nil {
		t.Fatal("no fs.diff")
	}
	t.Logf("scan %+v changes %v", d.Scan, rt11Changed(d))
	rt11AssertSeen(t, w, d, "bulk/63/core", was)
}

// rt11Flooder overflows the watch's queue: it opens for writing the nested contracts
// zq/a…/N/cordon.yaml (os.Args[1] of them, os.Args[2] levels deep), closes them all at
// once, and once 100 are closed opens every file of bulk/*/ read-only from three
// goroutines; then it writes victim.txt.
const rt11Flooder = `package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	depth, _ := strconv.Atoi(os.Args[2])
	base := "zq" + strings.Repeat("/a", depth)
	var files []*os.File
	for i := 0; i < n; i++ {
		if f, err := os.OpenFile(filepath.Join(base, strconv.Itoa(i), "cordon.yaml"), os.O_WRONLY, 0); err == nil {
			files = append(files, f)
		}
	}
	var closed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, f := range files {
			f.Close()
			closed.Add(1)
		}
	}()
	dirs, _ := filepath.Glob("bulk/*")
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for closed.Load() < 100 {
			}
			for i := g; i < len(dirs); i += 3 {
				d, err := os.Open(dirs[i])
				if err != nil {
					continue
				}
				names, _ := d.Readdirnames(-1)
				d.Close()
				for _, name := range names {
					if f, err := os.Open(filepath.Join(dirs[i], name)); err == nil {
						f.Close()
					}
				}
			}
		}(g)
	}
	wg.Wait()
	if err := os.WriteFile("victim.txt", []byte("NEW content\n"), 0o644); err != nil {
		panic(err)
	}
}
`

// TestRT11QueueOverflow really overflows the fanotify queue (16,384 events by
// default), which TestRedChangeSetHiddenWrites's flood does not: the watch's reader
// keeps up with any one process making files. Here its reader is held up instead. The
// workspace has 1,500 nested contracts 500 directories deep, each with the first
// quarantine names taken; the command opens them all for writing, then closes them at
// once: each FAN_CLOSE_WRITE of a cordon.yaml is disarmed (a slow rename, ten tries
// deep down) by the live watch's one handler, whose channel fills, and the reader
// waits on it while three goroutines open 32,000 files read-only (a FAN_OPEN each,
// no held call). Then the command writes victim.txt. HELD: the diff walks, says the
// queue overflowed, and has victim.txt with its content.
func TestRT11QueueOverflow(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	sharedBulk(t, w)
	const was = "old content\n"
	mustWrite(t, filepath.Join(w.ws, "victim.txt"), was)
	const contracts, depth = 1500, 500
	base := filepath.Join(w.ws, "zq"+strings.Repeat("/a", depth))
	for i := range contracts {
		d := filepath.Join(base, strconv.Itoa(i))
		mustWrite(t, filepath.Join(d, "cordon.yaml"), "version: 1\n")
		mustWrite(t, filepath.Join(d, "q"), "")
		for k := 1; k <= 9; k++ {
			name := "cordon.yaml.cordon-quarantine"
			if k > 1 {
				name += fmt.Sprintf("-%d", k)
			}
			if err := os.Link(filepath.Join(d, "q"), filepath.Join(d, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	buildProgram(t, w, "zflooder", rt11Flooder)
	r := w.cordon("", "run", "-v", "--", "./zflooder", strconv.Itoa(contracts), strconv.Itoa(depth))
	if r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	_, d := runEvents(t, w)
	if d == nil {
		t.Fatal("no fs.diff")
	}
	t.Logf("scan %+v, %d changes", d.Scan, len(d.Changes))
	if !strings.Contains(d.Scan.Walked, "overflowed") {
		t.Errorf("the flood did not overflow the queue, or the diff did not walk for it: %+v\n%s", d.Scan, grepLines(r.stderr, "diff"))
	}
	if b, _ := os.ReadFile(filepath.Join(w.ws, "victim.txt")); string(b) == was {
		t.Fatal("the command did not write victim.txt")
	}
	rt11AssertSeen(t, w, d, "victim.txt", was)
}

// rt11File is a regular file's content and mode.
type rt11File struct {
	data string
	mode fs.FileMode
}

// rt11Files are the regular files of w's workspace by slash-separated path.
func rt11Files(t *testing.T, w *world) map[string]rt11File {
	t.Helper()
	files := map[string]rt11File{}
	err := filepath.WalkDir(w.ws, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(w.ws, p)
		files[filepath.ToSlash(rel)] = rt11File{string(b), fi.Mode()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// rt11AssertDiff fails unless every regular file added, changed (content or mode) or
// removed since before is in d with what it now is.
func rt11AssertDiff(t *testing.T, w *world, d *audit.FSDiff, before map[string]rt11File) {
	t.Helper()
	byPath, gone := map[string]int{}, map[string]bool{}
	for i, c := range d.Changes {
		byPath[c.Path] = i
		if c.Op == "deleted" {
			gone[c.Path] = true
		}
		if c.OldPath != "" {
			gone[c.OldPath] = true
		}
	}
	after := rt11Files(t, w)
	for rel, f := range after {
		if was, ok := before[rel]; ok && was == f {
			continue
		}
		i, ok := byPath[rel]
		if !ok {
			t.Errorf("%s is new or changed (%q, %v) but not in the diff (scan %+v, changes %v)", rel, firstBytes([]byte(f.data)), f.mode, d.Scan, rt11Changed(d))
			continue
		}
		c := d.Changes[i]
		sum := sha256.Sum256([]byte(f.data))
		if c.NewSHA256 != "" && c.NewSHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s is in the diff with digest %s, its content has %x", rel, c.NewSHA256, sum)
		}
		if want := fmt.Sprintf("%o", 0o100000|uint32(f.mode.Perm())); c.NewMode != "" && c.NewMode != want {
			t.Errorf("%s is in the diff with mode %s, it has %s", rel, c.NewMode, want)
		}
	}
	for rel := range before {
		if _, ok := after[rel]; !ok && !gone[rel] {
			t.Errorf("%s was removed but the diff does not say so (changes %v)", rel, rt11Changed(d))
		}
	}
}

// TestRT11QuickWrites: writes through calls the barrier lets go once the baseline is
// read, or whose events differ from a plain write's, in a small workspace (the
// baseline is read before the command's first held call). Each change must be in the
// diff as the file now is. HELD, every one: each needs a write open (FAN_OPEN) or
// makes a name or attribute event.
func TestRT11QuickWrites(t *testing.T) {
	testutil.RequireRoot(t)
	py := func(code string) string { return "python3 -c '" + code + "'" }
	const acl = "ACL granting the sandbox's uid, the mode unchanged"
	for _, tc := range []struct{ name, script string }{
		{"copy_file_range", py(`
import os
src = os.open("other.txt", os.O_RDONLY)
dst = os.open("victim.txt", os.O_WRONLY)
os.copy_file_range(src, dst, 5)`)},
		{"sendfile", py(`
import os
src = os.open("other.txt", os.O_RDONLY)
dst = os.open("victim.txt", os.O_WRONLY)
os.sendfile(dst, src, 0, 5)`)},
		{"splice from a pipe", py(`
import os
r, w = os.pipe()
os.write(w, b"SPLICED")
dst = os.open("victim.txt", os.O_WRONLY)
os.splice(r, dst, 7)`)},
		{"pwritev2 RWF_APPEND", py(`
import os
fd = os.open("victim.txt", os.O_WRONLY)
os.pwritev(fd, [b"APPENDED"], 0, os.RWF_APPEND)`)},
		{"reopen a read-only descriptor through /proc/self/fd", py(`
import os
ro = os.open("victim.txt", os.O_RDONLY)  # before the baseline was read, maybe
os.mkdir("held")  # held until it is
fd = os.open("/proc/self/fd/%d" % ro, os.O_RDWR)
os.write(fd, b"REOPENED")`)},
		{"O_TMPFILE linked in by /proc/self/fd", py(`
import os
fd = os.open("d", os.O_TMPFILE | os.O_WRONLY, 0o644)
os.write(fd, b"from a tmpfile\n")
try:  # EXDEV where /proc and the workspace are on other mounts
    os.link("/proc/self/fd/%d" % fd, "d/linked.txt", follow_symlinks=True)
    os.rename("d/linked.txt", "victim.txt")
except OSError as e:
    print(e)`)},
		{"renameat2 RENAME_EXCHANGE of files", py(`
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
assert libc.renameat2(-100, b"victim.txt", -100, b"other.txt", 2) == 0`)},
		{"RENAME_EXCHANGE of directories after writes cached their paths", py(`
import ctypes
open("a/x.txt", "a").write("1")
open("b/y.txt", "a").write("2")
libc = ctypes.CDLL(None, use_errno=True)
assert libc.renameat2(-100, b"a", -100, b"b", 2) == 0
open("a/y.txt", "a").write("3")
open("b/x.txt", "a").write("4")`)},
		{"mmap write after the descriptor is closed", py(`
import mmap, os
fd = os.open("victim.txt", os.O_RDWR)
m = mmap.mmap(fd, 0)
os.close(fd)
m[0:3] = b"MAP"
m.flush()`)},
		{"fallocate zero range, same size", py(`
import ctypes, os
fd = os.open("victim.txt", os.O_RDWR)
libc = ctypes.CDLL(None, use_errno=True)
assert libc.fallocate(fd, 0x10 | 0x01, ctypes.c_long(0), ctypes.c_long(4)) == 0`)},
		{"chmod", py(`import os; os.chmod("victim.txt", 0o755)`)},
		{"write then restore size and times", py(`
import os
st = os.stat("victim.txt")
with open("victim.txt", "r+") as f:
    f.write("OLD")
os.utime("victim.txt", ns=(st.st_atime_ns, st.st_mtime_ns))`)},
		{"directory written, then replaced by a symlink out of the workspace", py(`
import os
open("d/inner.txt", "a").write("NEW")
os.rename("d", "e")
os.symlink("/etc", "d")`)},
		{"directory written, then replaced by a symlink to another of the workspace", py(`
import os
open("d/inner.txt", "a").write("NEW")
os.mkdir("f")
open("f/inner.txt", "w").write("decoy\n")
os.rename("d", "e")
os.symlink("f", "d")`)},
		{"io_uring is refused (its writes would need no call the barrier sees)", py(`
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
assert libc.syscall(425, 8, params) == -1, "io_uring_setup succeeded"`)},
		{acl, py(`
import os, struct
def entry(tag, perm, id=0xffffffff): return struct.pack("<HHI", tag, perm, id)
acl = struct.pack("<I", 2) + entry(1, 6) + entry(2, 7, os.getuid()) + entry(4, 4) + entry(0x10, 4) + entry(0x20, 4)
os.setxattr("victim.txt", "system.posix_acl_access", acl)`)},
		{"daemon outliving the command", `(setsid sh -c 'sleep 0.3; echo DAEMON > victim.txt' </dev/null >/dev/null 2>&1 &); exit 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			for rel, data := range map[string]string{"victim.txt": "old content\n", "other.txt": "other content\n",
				"d/inner.txt": "old inner\n", "a/x.txt": "x\n", "b/y.txt": "y\n"} {
				mustWrite(t, filepath.Join(w.ws, filepath.FromSlash(rel)), data)
			}
			before := rt11Files(t, w)
			if r := w.sh(tc.script); r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			_, d := runEvents(t, w)
			if d == nil {
				t.Fatal("no fs.diff")
			}
			if !d.Scan.Watched && d.Scan.Walked == "" {
				t.Errorf("the diff walked without saying why: %+v", d.Scan)
			}
			if tc.name == "daemon outliving the command" {
				time.Sleep(500 * time.Millisecond) // past the daemon's write, had it lived
			}
			rt11AssertDiff(t, w, d, before)
			if tc.name == acl && !rt11HasXattr(d, "victim.txt", "system.posix_acl_access") {
				t.Errorf("victim.txt's ACL is not in the diff: %+v", d.Changes)
			}
			if t.Failed() || testing.Verbose() {
				t.Logf("scan %+v changes %v", d.Scan, rt11Changed(d))
			}
		})
	}
}

// rt11HasXattr reports whether d has a change of the extended attribute name of rel.
func rt11HasXattr(d *audit.FSDiff, rel, name string) bool {
	for _, c := range d.Changes {
		for _, x := range c.Xattrs {
			if c.Path == rel && x.Name == name {
				return true
			}
		}
	}
	return false
}
