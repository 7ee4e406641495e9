package integration

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
)

// The barrier's tests race a command against the baseline of a workspace of
// bulkFiles files (bigWorkspace's bulk/). Making those files, and removing them at the
// test's end, was most of each test's time: 32,000 inodes made and freed, slow on
// this VM's journal-less ext4 whenever other tests make and remove files too. The
// test process makes the tree once instead and lends it to each test in turn.

// bulkFiles is how many files sharedBulk's tree holds: enough that the baseline is
// still being read when a command that writes at once starts.
const bulkFiles = 32000

// bulkPool holds the tree between tests. mu guards the fields below.
var bulkPool struct {
	mu    sync.Mutex
	dir   string                // a short temporary directory (swept if the process dies)
	ready bool                  // dir/bulk is there, as bigWorkspace makes it
	stats map[string]linux.Stat // each entry of dir/bulk ("" for bulk itself) as last made or checked
}

// sharedBulk gives w's workspace the tree bigWorkspace(t, w, bulkFiles) makes: the
// test process's one tree, moved in (a rename), or a new one when another test holds
// it. At the test's end the tree is moved out, and every entry the test changed,
// added or removed is put back as it was made: an entry is unchanged when its inode,
// type, mode, size, times and link count are (a change to an inode, its content, its
// attributes or its names moves its ctime, which no call sets back).
func sharedBulk(t *testing.T, w *world) {
	t.Helper()
	bulkPool.mu.Lock()
	defer bulkPool.mu.Unlock()
	if bulkPool.dir == "" {
		d, err := os.MkdirTemp("", shortTempPrefix(os.Getpid()))
		if err != nil {
			t.Fatal(err)
		}
		bulkPool.dir = d
	}
	pooled := filepath.Join(bulkPool.dir, "bulk")
	if !bulkPool.ready {
		if _, err := os.Lstat(pooled); err == nil {
			// Lent out to a test still running (or lost): a tree of the test's own.
			bigWorkspace(t, w, bulkFiles)
			return
		}
		if err := makeBulk(pooled); err != nil {
			_ = os.RemoveAll(pooled)
			t.Fatal(err)
		}
		bulkPool.ready = true
	}
	mine := filepath.Join(w.ws, "bulk")
	if err := os.Rename(pooled, mine); err != nil {
		t.Fatal(err)
	}
	bulkPool.ready = false
	t.Cleanup(func() {
		bulkPool.mu.Lock()
		defer bulkPool.mu.Unlock()
		if err := os.Rename(mine, pooled); err != nil {
			return // the test's workspace goes with the tree (its own cleanup)
		}
		if err := repairBulk(pooled); err != nil {
			t.Logf("the shared bulk tree is made anew for the next test: %v", err)
			_ = os.RemoveAll(pooled)
			return
		}
		bulkPool.ready = true
	})
}

// removeBulkPool removes the tree sharedBulk kept, once the tests are done.
func removeBulkPool() {
	if bulkPool.dir != "" {
		_ = os.RemoveAll(bulkPool.dir)
	}
}

// bulkDirs is how many directories of 500 the tree has.
const bulkDirs = (bulkFiles + 499) / 500

// bulkNames is the names directory i of the tree holds, with their content.
func bulkNames(i int) map[string]string {
	out := map[string]string{}
	for j := i * 500; j < min((i+1)*500, bulkFiles); j++ {
		out[strconv.Itoa(j)] = "bulk " + strconv.Itoa(j) + "\n"
	}
	return out
}

// makeBulk makes the tree at top as bigWorkspace does, and records its entries.
func makeBulk(top string) error {
	bulkPool.stats = map[string]linux.Stat{}
	if err := os.Mkdir(top, 0o755); err != nil {
		return err
	}
	for i := range bulkDirs {
		if err := makeBulkDir(top, i); err != nil {
			return err
		}
	}
	return recordBulk(top, "")
}

// makeBulkDir makes directory i of the tree at top and its files, and records them.
func makeBulkDir(top string, i int) error {
	dir := filepath.Join(top, strconv.Itoa(i))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for name, content := range bulkNames(i) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	names := make([]string, 0, 500)
	for name := range bulkNames(i) {
		names = append(names, name)
	}
	return recordBulk(top, strconv.Itoa(i), names...)
}

// recordBulk records the stat of the directory rel of the tree at top and of its
// entries names.
func recordBulk(top, rel string, names ...string) error {
	fd, err := linux.OpenDirPath(filepath.Join(top, rel))
	if err != nil {
		return err
	}
	defer linux.Close(fd)
	st, err := linux.Fstat(fd)
	if err != nil {
		return err
	}
	bulkPool.stats[rel] = st
	for _, name := range names {
		st, err := linux.Lstatat(fd, name)
		if err != nil {
			return err
		}
		bulkPool.stats[filepath.Join(rel, name)] = st
	}
	return nil
}

// repairBulk puts the tree at top back as makeBulk made it: what a test added is
// removed, what it removed or changed is made again.
func repairBulk(top string) error {
	want := map[string]map[string]string{"": {}}
	for i := range bulkDirs {
		want[""][strconv.Itoa(i)] = ""
	}
	// The top first: a directory it lacks, or that is no longer one, is made anew (a
	// directory still there is put back below).
	isDir := func(_ string, st linux.Stat) bool { return st.Mode&0o170000 == 0o040000 }
	if err := repairBulkDir(top, "", want[""], isDir, func(name string) error {
		i, _ := strconv.Atoi(name)
		if err := os.RemoveAll(filepath.Join(top, name)); err != nil {
			return err
		}
		return makeBulkDir(top, i)
	}); err != nil {
		return err
	}
	for i := range bulkDirs {
		rel := strconv.Itoa(i)
		names := bulkNames(i)
		if err := repairBulkDir(top, rel, names, asMade, func(name string) error {
			p := filepath.Join(top, rel, name)
			if err := os.RemoveAll(p); err != nil {
				return err
			}
			return os.WriteFile(p, []byte(names[name]), 0o644)
		}); err != nil {
			return err
		}
	}
	return nil
}

// asMade reports whether st is the recorded stat of the entry rel.
func asMade(rel string, st linux.Stat) bool {
	old, ok := bulkPool.stats[rel]
	return ok && st == old
}

// repairBulkDir puts back the directory rel of the tree at top, which holds names:
// unless its own stat is as recorded (nothing was added to it, removed from it or
// renamed in it, nor its mode or attributes changed), the names it should not hold
// are removed and its mode and attributes set back; then each of names that is
// missing, or whose stat keep refuses, is made again by remake.
func repairBulkDir(top, rel string, names map[string]string, keep func(rel string, st linux.Stat) bool, remake func(name string) error) error {
	dir := filepath.Join(top, rel)
	fd, err := linux.OpenDirPath(dir)
	if err != nil {
		return err
	}
	defer linux.Close(fd)
	st, err := linux.Fstat(fd)
	if err != nil {
		return err
	}
	dirChanged := !asMade(rel, st)
	if dirChanged {
		have, err := linux.DirNames(fd, make([]byte, 32<<10))
		if err != nil {
			return err
		}
		for _, name := range have {
			if _, ok := names[name]; !ok {
				if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
					return err
				}
			}
		}
		if err := os.Chmod(dir, os.FileMode(bulkPool.stats[rel].Mode&0o7777)); err != nil {
			return err
		}
		attrs, err := linux.Llistxattr(dir)
		if err != nil {
			return err
		}
		for _, a := range attrs {
			if err := linux.Lremovexattr(dir, a); err != nil {
				return err
			}
		}
	}
	var remade []string
	for name := range names {
		st, err := linux.Lstatat(fd, name)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err == nil && keep(filepath.Join(rel, name), st) {
			continue
		}
		if err := remake(name); err != nil {
			return err
		}
		remade = append(remade, name)
	}
	if !dirChanged && len(remade) == 0 {
		return nil
	}
	if rel == "" {
		remade = nil // remade directories recorded themselves
	}
	return recordBulk(top, rel, remade...)
}
