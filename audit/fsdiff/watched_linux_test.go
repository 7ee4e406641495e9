package fsdiff

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// bothWays takes two baselines of dir under a change watch, lets change run, and
// returns the walk's diff and the watched one (failing when the watched one could
// not be had).
func bothWays(t *testing.T, dir string, opts Options, change func()) (walk, watched *Result) {
	return bothWaysOld(t, dir, opts, false, change)
}

// bothWaysOld is bothWays; with old, the baselines take no file for racy (as if the
// workspace were older than the racy window), so that only the change set brings a
// file to be read again: the clock first ticks past the last write of the setup, so
// that the walk sees every change too.
func bothWaysOld(t *testing.T, dir string, opts Options, old bool, change func()) (walk, watched *Result) {
	t.Helper()
	if old {
		waitTick(t, dir)
		var calls atomic.Int32
		opts.now = func() time.Time {
			if calls.Add(1) <= 2 {
				return time.Now().Add(time.Hour)
			}
			return time.Now()
		}
	}
	w, err := linux.WatchChanges(dir, func(string, bool) bool { return false }, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	go func() {
		for range w.Events() {
		}
	}()
	ctx := context.Background()
	a, err := New(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(ctx, dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	must(t, w.WatchOpens(dir))
	change()
	c := w.Changes()
	if c.Untrusted != "" {
		t.Fatalf("the change set cannot be trusted: %s", c.Untrusted)
	}
	lastChanges = fmt.Sprintf("%v %v", c.Paths, c.Objects)
	watched, why, err := b.DiffWatched(ctx, WatchedFrom(c.Paths, c.Objects))
	if err != nil || why != "" {
		t.Fatalf("watched diff: %v %s", err, why)
	}
	if walk, err = a.Diff(ctx); err != nil {
		t.Fatal(err)
	}
	return walk, watched
}

// sameDiff fails unless the two diffs list the same changes with the same patch.
func sameDiff(t *testing.T, walk, watched *Result) {
	t.Helper()
	if !reflect.DeepEqual(walk.Changes, watched.Changes) || !bytes.Equal(walk.Patch, watched.Patch) {
		t.Errorf("the watched diff differs from the walk's:\nwalk:\n%s\nwatched:\n%s", walk.Patch, watched.Patch)
		t.Errorf("walk changes %+v\nwatched changes %+v", walk.Changes, watched.Changes)
	}
	if !reflect.DeepEqual(walk.Problems, watched.Problems) {
		t.Errorf("problems: walk %q, watched %q", walk.Problems, watched.Problems)
	}
}

// Each golden case, diffed from the change set a fanotify watch recorded, gives the
// golden patch, as the walk does.
func TestDiffWatchedGolden(t *testing.T) {
	testutil.RequireRoot(t)
	for _, tt := range goldenCases {
		t.Run(tt.name, func(t *testing.T) {
			w := newWS(t, tt.before)
			walk, watched := bothWays(t, w.dir, tt.opts, func() { tt.change(w) })
			sameDiff(t, walk, watched)
			golden(t, filepath.Join("testdata", tt.name+".patch"), watched.Patch)
		})
	}
}

// A change the diff would miss if only the workspace's names were watched: a write
// through a hard link outside it, made before the baseline or during the command.
func TestDiffWatchedThroughLinks(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	dir, out := filepath.Join(top, "ws"), filepath.Join(top, "out")
	must(t, os.Mkdir(out, 0o755))
	w := newWSAt(t, dir, map[string]string{"before.txt": "1\n", "during.txt": "2\n"})
	must(t, os.Link(w.path("before.txt"), filepath.Join(out, "b")))
	walk, watched := bothWaysOld(t, dir, Options{}, true, func() {
		must(t, os.WriteFile(filepath.Join(out, "b"), []byte("changed\n"), 0o644))
		must(t, os.Link(w.path("during.txt"), filepath.Join(out, "d")))
		must(t, os.WriteFile(filepath.Join(out, "d"), []byte("changed\n"), 0o644))
	})
	sameDiff(t, walk, watched)
	if len(watched.Changes) != 2 {
		t.Errorf("want both files changed, got:\n%s", watched.Patch)
	}
}

// waitTick waits until a file written now gets a later change time than the last
// entry written in dir: the file system's clock has ticked.
func waitTick(t *testing.T, dir string) {
	t.Helper()
	ctime := func(fi os.FileInfo) int64 { return fi.Sys().(*syscall.Stat_t).Ctim.Nano() }
	var last int64
	_ = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			last = max(last, ctime(fi))
		}
		return nil
	})
	probe := filepath.Join(filepath.Dir(dir), "tick-probe")
	defer os.Remove(probe)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		must(t, os.WriteFile(probe, nil, 0o644))
		fi, err := os.Stat(probe)
		must(t, err)
		if ctime(fi) > last {
			return
		}
	}
	t.Fatal("the file system's clock did not tick")
}

// An mmap write whose file is still open when the change set is taken (its
// FAN_CLOSE_WRITE not yet sent: the last reference to a file can outlive the command,
// in flight on a socket) is in the diff: the open is.
func TestDiffWatchedMmapStillOpen(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	dir := filepath.Join(top, "ws")
	w := newWSAt(t, dir, map[string]string{"m.txt": "abc\n"})
	walk, watched := bothWaysOld(t, dir, Options{}, true, func() {
		fd, err := os.OpenFile(w.path("m.txt"), os.O_RDWR, 0)
		must(t, err)
		t.Cleanup(func() { fd.Close() })
		must(t, linux.WriteMapped(fd, 0, []byte("X")))
	})
	sameDiff(t, walk, watched)
	if len(watched.Changes) != 1 {
		t.Errorf("want the mmap write, got:\n%s", watched.Patch)
	}
}

// lastChanges is the last change set bothWays took, for a failure's log.
var lastChanges string

func newWSAt(t *testing.T, dir string, files map[string]string) ws {
	must(t, os.MkdirAll(dir, 0o755))
	w := ws{t, dir}
	for name, content := range files {
		w.write(name, content)
	}
	return w
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Random sequences of file operations, inside the workspace, out of it and back,
// give the same diff watched as walked.
func TestDiffWatchedRandom(t *testing.T) {
	testutil.RequireRoot(t)
	rounds := 30
	if n, err := strconv.Atoi(os.Getenv("CORDON_WATCHED_ROUNDS")); err == nil {
		rounds = n
	}
	if testing.Short() {
		rounds = 5
	}
	for seed := range rounds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			top := t.TempDir()
			dir, out := filepath.Join(top, "ws"), filepath.Join(top, "out")
			must(t, os.Mkdir(out, 0o755))
			files := map[string]string{}
			for i := range 12 {
				files[fmt.Sprintf("d%d/f%d", i%3, i)] = fmt.Sprintf("line %d\n", i)
			}
			w := newWSAt(t, dir, files)
			r := rand.New(rand.NewPCG(uint64(seed), 39))
			// A file linked from outside before the baseline.
			_ = os.Link(w.path("d0/f0"), filepath.Join(out, "pre"))
			var log []string
			walk, watched := bothWaysOld(t, dir, Options{}, true, func() {
				for range 25 {
					log = append(log, randomOp(r, dir, out))
				}
			})
			if !reflect.DeepEqual(walk.Changes, watched.Changes) || !bytes.Equal(walk.Patch, watched.Patch) {
				t.Logf("operations: %q", log)
				t.Logf("change set: %s", lastChanges)
			}
			sameDiff(t, walk, watched)
		})
	}
}

// randomOp does one random file operation in the workspace dir or the directory out
// beside it (same file system), and says what it did.
func randomOp(r *rand.Rand, dir, out string) string {
	pick := func(root string, dirs bool) string { return pickEntry(r, root, dirs) }
	anyRoot := func() string { return pickRoot(r, dir, out) }
	newName := func(root string) string {
		d := pick(root, true)
		if d == "" || r.IntN(3) == 0 {
			d = root
		}
		return filepath.Join(d, fmt.Sprintf("n%d", r.IntN(1000)))
	}
	f := pick(anyRoot(), false)
	switch op := r.IntN(14); {
	case op == 0:
		p := newName(anyRoot())
		return fmt.Sprint("create ", p, os.WriteFile(p, []byte("new\n"), 0o644))
	case op == 1 && f != "":
		return fmt.Sprint("write ", f, os.WriteFile(f, []byte(fmt.Sprintf("w%d\n", r.IntN(9))), 0o644))
	case op == 2 && f != "":
		return fmt.Sprint("truncate ", f, os.Truncate(f, int64(r.IntN(3))))
	case op == 3 && f != "":
		return fmt.Sprint("chmod ", f, os.Chmod(f, os.FileMode(0o600+r.IntN(2)*0o155)))
	case op == 4 && f != "":
		return fmt.Sprint("xattr ", f, linux.Lsetxattr(f, "user.k", fmt.Sprint(r.IntN(3))))
	case op == 5 && f != "":
		to := newName(anyRoot())
		return fmt.Sprint("rename ", f, " ", to, os.Rename(f, to))
	case op == 6:
		d := pick(anyRoot(), true)
		if d == "" {
			return "no dir"
		}
		to := newName(anyRoot())
		return fmt.Sprint("rename dir ", d, " ", to, os.Rename(d, to))
	case op == 7 && f != "":
		to := newName(anyRoot())
		return fmt.Sprint("link ", f, " ", to, os.Link(f, to))
	case op == 8 && f != "":
		return fmt.Sprint("delete ", f, os.Remove(f))
	case op == 9 && f != "":
		return fmt.Sprint("mmap write ", f, mmapWrite(f, byte('A'+r.IntN(26))))
	case op == 10:
		p := newName(anyRoot())
		return fmt.Sprint("mkdir ", p, os.Mkdir(p, 0o755))
	case op == 11 && f != "":
		t := time.Unix(int64(r.IntN(1e9)), 0)
		return fmt.Sprint("utimes ", f, os.Chtimes(f, t, t))
	case op == 12 && f != "":
		fd, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			return "fallocate " + err.Error()
		}
		defer fd.Close()
		return fmt.Sprint("fallocate ", f, linux.Allocate(fd, 0, 0, int64(1+r.IntN(4096))))
	case op == 13:
		d := pick(dir, true)
		if d == "" {
			return "no dir"
		}
		return fmt.Sprint("remove tree ", d, os.RemoveAll(d))
	}
	return "nothing"
}

// mmapWrite changes the first byte of the file f through a shared mapping.
func mmapWrite(f string, b byte) error {
	fd, err := os.OpenFile(f, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil || fi.Size() == 0 {
		return err
	}
	return linux.WriteMapped(fd, 0, []byte{b})
}

// Chained as a session chains them: each round's diff from the round's change set
// starts from the snapshot the previous watched diff left (its listings, its suspects,
// its counts), not from a walk; every round gives the walk's diff and the walk's
// count of files. Each round's changes are older than the racy window when diffed, so
// only the change set tells what to read.
func TestDiffWatchedChained(t *testing.T) {
	testutil.RequireRoot(t)
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			top := t.TempDir()
			dir, out := filepath.Join(top, "ws"), filepath.Join(top, "out")
			must(t, os.Mkdir(out, 0o755))
			files := map[string]string{}
			for i := range 30 {
				files[fmt.Sprintf("d%d/e%d/f%d", i%3, i%2, i)] = fmt.Sprintf("line %d\n", i)
			}
			newWSAt(t, dir, files)
			waitTick(t, dir)
			w, err := linux.WatchChanges(dir, func(string, bool) bool { return false }, 1<<20)
			must(t, err)
			defer w.Close()
			go func() {
				for range w.Events() {
				}
			}()
			ctx := context.Background()
			time.Sleep(2 * racyWindow) // the condition is the clock: nothing racy at the baseline
			walked, err := New(ctx, dir, Options{})
			must(t, err)
			watched, err := New(ctx, dir, Options{})
			must(t, err)
			w.TakeChanges()
			must(t, w.WatchOpens(dir))
			r := rand.New(rand.NewPCG(uint64(seed), 77))
			for round := range 6 {
				var log []string
				for range 12 {
					log = append(log, randomOp(r, dir, out))
				}
				time.Sleep(2 * racyWindow)
				c := w.TakeChanges()
				walk, err := walked.Diff(ctx)
				must(t, err)
				if c.Untrusted != "" {
					// A busy machine's events overflowed the queue (the mark is the
					// whole file system's): a session walks, and so does the test.
					t.Logf("round %d: %s: walked", round, c.Untrusted)
					_, err := watched.Diff(ctx)
					must(t, err)
					continue
				}
				got, why, err := watched.DiffWatched(ctx, WatchedFrom(c.Paths, c.Objects))
				if err != nil || why != "" {
					t.Fatalf("round %d: watched diff: %v %s", round, err, why)
				}
				if !reflect.DeepEqual(walk.Changes, got.Changes) {
					t.Logf("round %d operations: %q; change set %v", round, log, c.Paths)
				}
				sameDiff(t, walk, got)
				if walk.Scan.Files != got.Scan.Files {
					t.Errorf("round %d: %d files counted watched, %d walked", round, got.Scan.Files, walk.Scan.Files)
				}
			}
		})
	}
}

// A second write through a mapping whose page is already dirty changes a file's
// content and nothing of its stat data: a walk, and a diff from a report that does
// not name the file, keep the old entry. Reread makes both read it again.
func TestRereadDirtyMapping(t *testing.T) {
	testutil.RequireRoot(t)
	ctx := context.Background()
	for _, how := range []string{"walk", "watched"} {
		t.Run(how, func(t *testing.T) {
			w := newWS(t, map[string]string{"d/victim": "original\n"})
			f, err := os.OpenFile(w.path("d/victim"), os.O_RDWR, 0)
			must(t, err)
			defer f.Close()
			m, unmap, err := linux.MapShared(f, 9)
			must(t, err)
			defer unmap()
			m[0] = 'A'                 // faults: the mtime moves
			time.Sleep(2 * racyWindow) // the condition is the clock: not racy at the baseline
			tracker := func(rr Reread) *Tracker {
				t.Helper()
				tr, err := New(ctx, w.dir, Options{})
				must(t, err)
				fork, _, err := tr.Fork(ctx)
				must(t, err)
				fork.Reread(rr)
				return fork
			}
			plain, reread := tracker(Reread{}), tracker(Reread{Paths: []ChangedPath{{Path: "d", Deep: true}}})
			m[1] = 'B' // no fault, no time moved
			take := func(tr *Tracker) *Result {
				t.Helper()
				if how == "walk" {
					res, err := tr.Diff(ctx)
					must(t, err)
					return res
				}
				res, why, err := tr.DiffWatched(ctx, Watched{})
				if err != nil || why != "" {
					t.Fatal(why, err)
				}
				return res
			}
			if res := take(plain); len(res.Changes) != 0 {
				t.Logf("the second write was seen without Reread (its page was cleaned meanwhile?): %+v", res.Changes)
			}
			res := take(reread)
			if len(res.Changes) != 1 || res.Changes[0].Path != "d/victim" || !bytes.Contains(res.Patch, []byte("+ABiginal")) {
				t.Errorf("with Reread the write through the dirty mapping is not in the diff: %+v\n%s", res.Changes, res.Patch)
			}
		})
	}
}

// pickEntry is a random entry below root (a directory with dirs, else a file; never a
// symbolic link), or "" when there is none.
func pickEntry(r *rand.Rand, root string, dirs bool) string {
	var all []string
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && p != root && fi.IsDir() == dirs && fi.Mode()&os.ModeSymlink == 0 {
			all = append(all, p)
		}
		return nil
	})
	if len(all) == 0 {
		return ""
	}
	return all[r.IntN(len(all))]
}

// pickRoot is out one time in four, else dir.
func pickRoot(r *rand.Rand, dir, out string) string {
	if r.IntN(4) == 0 {
		return out
	}
	return dir
}
