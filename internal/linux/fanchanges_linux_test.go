package linux

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cordonhq/cordon/internal/testutil"
)

// WatchChanges records, under its directory only, each kind of change: a name made
// (the whole new tree), a write, an attribute, a removal, and a hard link made
// elsewhere (an object event: no directory, the file's inode).
func TestWatchChanges(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	dir, out := filepath.Join(top, "ws"), filepath.Join(top, "out")
	for _, d := range []string{dir, out, filepath.Join(dir, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"sub/w", "sub/a", "sub/gone", "linked"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(out, "o"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := WatchChanges(dir, func(string, bool) bool { return false }, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	go func() {
		for range w.Events() {
		}
	}()
	f, err := os.OpenFile(filepath.Join(dir, "sub/w"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("y")
	f.Close()
	must(t, os.Chmod(filepath.Join(dir, "sub/a"), 0o600))
	must(t, os.Remove(filepath.Join(dir, "sub/gone")))
	must(t, os.MkdirAll(filepath.Join(dir, "new/deep"), 0o755))
	must(t, os.WriteFile(filepath.Join(out, "o2"), []byte("x"), 0o644))
	must(t, os.Link(filepath.Join(dir, "linked"), filepath.Join(out, "l")))
	// A file named nowhere any more (unlinked while open), written: no object of
	// the workspace's, whatever else changes on the file system.
	tmp, err := os.Create(filepath.Join(out, "tmp"))
	must(t, err)
	defer tmp.Close()
	var tst syscall.Stat_t
	must(t, syscall.Fstat(int(tmp.Fd()), &tst))
	must(t, os.Remove(tmp.Name()))
	_, err = tmp.WriteString("unnamed")
	must(t, err)
	must(t, tmp.Chmod(0o600))
	c := w.Changes()
	if c.Untrusted != "" {
		t.Fatal(c.Untrusted)
	}
	t.Logf("%v %v", c.Paths, c.Objects)
	want := map[string]bool{"sub/w": false, "sub/a": false, "sub/gone": true, "sub": false, "new": true, ".": false}
	for p, tree := range want {
		if got, ok := c.Paths[p]; !ok || got != tree {
			t.Errorf("%s: recorded %v %v, want %v", p, got, ok, tree)
		}
	}
	for p := range c.Paths {
		if filepath.IsAbs(p) || p == "o2" || p == "l" {
			t.Errorf("recorded %q, outside the directory", p)
		}
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(filepath.Join(dir, "linked"), &st))
	found := false
	for _, o := range c.Objects {
		found = found || o == [2]uint64{st.Dev, st.Ino}
	}
	if !found {
		t.Errorf("the link made elsewhere is not among the objects %v", c.Objects)
	}
	for _, o := range c.Objects {
		if o == [2]uint64{tst.Dev, tst.Ino} {
			t.Errorf("the file named nowhere is among the objects %v", c.Objects)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ReportsChanges accepts a directory of the root file system and refuses one with a
// mount below it, or one on a file system not known to report every change.
func TestReportsChanges(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	why := ReportsChanges(dir)
	testutil.Require(t, why == "", "a test directory on a file system known to report every change: "+why)
	sub := filepath.Join(dir, "m")
	must(t, os.Mkdir(sub, 0o755))
	must(t, unix.Mount("tmpfs", sub, "tmpfs", 0, ""))
	defer unix.Unmount(sub, unix.MNT_DETACH)
	if why := ReportsChanges(dir); !strings.Contains(why, "mount inside") {
		t.Errorf("a mount below the workspace: %q", why)
	}
	if why := ReportsChanges("/proc"); why == "" {
		t.Error("proc is taken for a file system that reports every change")
	}
}

// A directory too deep for a path to name is ignored outside the watched directory and
// distrusts the change set inside it.
func TestWatchChangesDeepDirectory(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	dir, out := filepath.Join(top, "ws"), filepath.Join(top, "out")
	for _, d := range []string{dir, out} {
		must(t, os.Mkdir(d, 0o755))
	}
	deep := func(base string) string {
		fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY, 0)
		must(t, err)
		name := strings.Repeat("d", 200)
		for range 30 { // 30 × 201 bytes: past PATH_MAX
			must(t, unix.Mkdirat(fd, name, 0o755))
			next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY, 0)
			must(t, err)
			unix.Close(fd)
			fd = next
		}
		must(t, unix.Mkdirat(fd, "leaf", 0o755))
		unix.Close(fd)
		return base
	}
	for _, tc := range []struct {
		base    string
		trusted bool
	}{{out, true}, {dir, false}} {
		w, err := WatchChanges(dir, func(string, bool) bool { return false }, 1<<20)
		must(t, err)
		go func() {
			for range w.Events() {
			}
		}()
		deep(tc.base)
		c := w.Changes()
		w.Close()
		if (c.Untrusted == "") != tc.trusted || !tc.trusted && !strings.Contains(c.Untrusted, "too long") {
			t.Errorf("a deep directory below %s: untrusted %q", tc.base, c.Untrusted)
		}
	}
}

// Past its bound of paths a change log stops recording and says the set cannot be
// trusted.
func TestWatchChangesBound(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	w, err := WatchChanges(dir, func(string, bool) bool { return false }, 10)
	must(t, err)
	defer w.Close()
	go func() {
		for range w.Events() {
		}
	}()
	for i := range 20 {
		must(t, os.WriteFile(filepath.Join(dir, strings.Repeat("n", 10)+string(rune('a'+i))), nil, 0o644))
	}
	if c := w.Changes(); !strings.Contains(c.Untrusted, "more than 10 paths") || c.Paths != nil {
		t.Errorf("past the bound: %q, %d paths", c.Untrusted, len(c.Paths))
	}
}

// Placing directories too deep to name costs a bounded climb: a chain made one
// directory below the other outside the watched directory (each new directory's
// parent too deep to name) climbs through each directory about once, not up to the
// top for each (3,000 deep: some 2.9 million steps before), and a chain inside it
// distrusts the set at its first event too deep to name.
func TestWatchChangesDeepChainClimbsOnce(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	dir, out := filepath.Join(top, "ws"), filepath.Join(top, "out")
	for _, d := range []string{dir, out} {
		must(t, os.Mkdir(d, 0o755))
	}
	const depth = 3000 // 2 bytes a level: past PATH_MAX from about 2,040
	for _, tc := range []struct {
		base    string
		trusted bool
	}{{out, true}, {dir, false}} {
		w, err := WatchChanges(dir, func(string, bool) bool { return false }, 1<<20)
		must(t, err)
		go func() {
			for range w.Events() {
			}
		}()
		fd, err := unix.Open(tc.base, unix.O_PATH|unix.O_DIRECTORY, 0)
		must(t, err)
		for range depth {
			must(t, unix.Mkdirat(fd, "c", 0o755))
			next, err := unix.Openat(fd, "c", unix.O_PATH|unix.O_DIRECTORY, 0)
			must(t, err)
			unix.Close(fd)
			fd = next
		}
		unix.Close(fd)
		c := w.Changes()
		w.log.mu.Lock()
		climbed := w.log.climbed
		w.log.mu.Unlock()
		w.Close()
		if (c.Untrusted == "") != tc.trusted || !tc.trusted && !strings.Contains(c.Untrusted, "too long to name") {
			t.Errorf("a deep chain below %s: untrusted %q", tc.base, c.Untrusted)
		}
		// Linear: under load the events come in other batches and a directory may be
		// climbed a few times (3.7 a level seen in CI); the quadratic climb this
		// guards is some 1,000 a level.
		if climbed > 8*depth {
			t.Errorf("a chain %d deep below %s: %d parent directories climbed", depth, tc.base, climbed)
		}
	}
}

// TakeChanges hands over one set and starts the next from empty: a set past its bound
// is untrusted until taken, the next is trusted again; a directory moved in one set is
// named by its new path in the next (no stale cached path); opens are recorded only
// between WatchOpens and UnwatchOpens.
func TestTakeChanges(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "d/in"), 0o755))
	for _, f := range []string{"a", "b", "r", "d/in/x"} {
		must(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644))
	}
	w := watchChanges(t, dir, 4)
	appendTo := func(rel string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, rel), os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		_, err = f.WriteString("y")
		must(t, err)
		must(t, f.Close())
	}
	appendTo("a")
	appendTo("d/in/x") // its directory's path is cached now
	c := w.TakeChanges()
	if c.Untrusted != "" || !hasPath(c, "a") {
		t.Fatalf("first set lacks a: %v %q", c.Paths, c.Untrusted)
	}
	must(t, os.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "e")))
	appendTo("b")
	c = w.TakeChanges()
	if _, ok := c.Paths["a"]; ok || c.Untrusted != "" {
		t.Errorf("second set holds the first's a, or is untrusted: %v %q", c.Paths, c.Untrusted)
	}
	if _, ok := c.Paths["b"]; !ok {
		t.Errorf("second set lacks b: %v", c.Paths)
	}
	appendTo("e/in/x")
	c = w.TakeChanges()
	if _, ok := c.Paths["e/in/x"]; !ok || c.Untrusted != "" {
		t.Errorf("a write below the moved directory is not named by its new path: %v %q", c.Paths, c.Untrusted)
	}
	if _, ok := c.Paths["d/in/x"]; ok {
		t.Errorf("a write below the moved directory is named by its old path: %v", c.Paths)
	}
	for i := range 6 {
		must(t, os.WriteFile(filepath.Join(dir, "n"+strings.Repeat("x", i)), nil, 0o644))
	}
	if c = w.TakeChanges(); c.Untrusted == "" {
		t.Errorf("a set past its bound of 4 paths is trusted: %v", c.Paths)
	}
	appendTo("b")
	if c = w.TakeChanges(); c.Untrusted != "" {
		t.Errorf("the set after an untrusted one is untrusted: %q", c.Untrusted)
	}
	read := func() {
		t.Helper()
		_, err := os.ReadFile(filepath.Join(dir, "r"))
		must(t, err)
	}
	read()
	if c = w.TakeChanges(); len(c.Paths) != 0 {
		t.Errorf("a read with opens unwatched is recorded: %v", c.Paths)
	}
	must(t, w.WatchOpens(dir))
	read()
	if c = w.TakeChanges(); !hasPath(c, "r") {
		t.Errorf("a read with opens watched is not recorded: %v %q", c.Paths, c.Untrusted)
	}
	must(t, w.UnwatchOpens(dir))
	read()
	if c = w.TakeChanges(); len(c.Paths) != 0 || c.Untrusted != "" {
		t.Errorf("a read after UnwatchOpens is recorded: %v %q", c.Paths, c.Untrusted)
	}
	// Directories' own events are still reported once opens are not.
	must(t, os.Mkdir(filepath.Join(dir, "made"), 0o755))
	must(t, os.Rename(filepath.Join(dir, "e"), filepath.Join(dir, "moved")))
	c = w.TakeChanges()
	for _, p := range []string{"made", "moved", "e"} {
		if !hasPath(c, p) {
			t.Errorf("after UnwatchOpens, a directory made or moved is not recorded (%s): %v %q", p, c.Paths, c.Untrusted)
		}
	}
}

func hasPath(c Changes, p string) bool {
	_, ok := c.Paths[p]
	return ok
}

// Past IdleAfter's bound of events (anywhere on the file system) the watch stops
// recording changes and says so until Busy: the set taken then is untrusted, and so
// is every one taken before Busy; after it sets are trusted and complete again.
func TestIdleAfter(t *testing.T) {
	testutil.RequireRoot(t)
	top := t.TempDir()
	dir, out := filepath.Join(top, "ws"), filepath.Join(top, "out")
	must(t, os.Mkdir(dir, 0o755))
	must(t, os.Mkdir(out, 0o755))
	w := watchChanges(t, dir, 1<<20)
	f, err := os.Create(filepath.Join(out, "busy"))
	must(t, err)
	defer f.Close()
	w.IdleAfter(50)
	for range 200 {
		_, err := f.Write([]byte("x"))
		must(t, err)
		_ = w.Changes() // read what is queued: each write its own event
	}
	must(t, os.WriteFile(filepath.Join(dir, "a"), []byte("x"), 0o644))
	if c := w.TakeChanges(); c.Untrusted == "" || !strings.Contains(c.Untrusted, "while no command ran") {
		t.Fatalf("past the idle bound the set is trusted: %v %q", c.Paths, c.Untrusted)
	}
	if c := w.TakeChanges(); c.Untrusted == "" {
		t.Fatalf("a set taken before Busy is trusted: %v", c.Paths)
	}
	must(t, w.Busy())
	w.TakeChanges()
	must(t, os.WriteFile(filepath.Join(dir, "b"), []byte("x"), 0o644))
	f2, err := os.OpenFile(filepath.Join(dir, "a"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f2.Write([]byte("y"))
	must(t, err)
	c := w.TakeChanges()
	f2.Close()
	if c.Untrusted != "" || !hasPath(c, "b") || !hasPath(c, "a") {
		t.Errorf("after Busy a write is not recorded: %v %q", c.Paths, c.Untrusted)
	}
	// StopChanges is for good: no set is trusted after it, whatever is taken.
	must(t, w.StopChanges("no cgroups"))
	for range 2 {
		must(t, os.WriteFile(filepath.Join(dir, "c"), []byte("x"), 0o644))
		if c := w.TakeChanges(); c.Untrusted != "no cgroups" {
			t.Errorf("a set after StopChanges: %v %q", c.Paths, c.Untrusted)
		}
	}
}

// watchChanges is a WatchChanges watch of dir whose creations are read and dropped,
// closed at the end of the test.
func watchChanges(t *testing.T, dir string, maxPaths int) *CreateWatch {
	t.Helper()
	w, err := WatchChanges(dir, func(string, bool) bool { return false }, maxPaths)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	go func() {
		for range w.Events() {
		}
	}()
	return w
}
