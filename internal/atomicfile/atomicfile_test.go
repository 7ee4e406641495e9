package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// leftovers lists the temporary files left in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var tmp []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			tmp = append(tmp, e.Name())
		}
	}
	return tmp
}

// writers are Write, WriteUnsynced and WriteSyncing (waited for), which differ only in
// durability.
var writers = []struct {
	name  string
	write func(string, []byte, os.FileMode) error
}{{"Write", Write}, {"WriteUnsynced", WriteUnsynced}, {"WriteSyncing", writeSynced}}

// writeSynced is WriteSyncing, then waits until it is durable.
func writeSynced(path string, data []byte, perm os.FileMode) error {
	durable, err := WriteSyncing(path, data, perm)
	if err != nil {
		return err
	}
	if err := durable(); err != nil {
		return err
	}
	return durable() // a second wait returns the same
}

// TestWriteSyncingReportsTheSync: the sync that runs beside the caller reports its
// failure through durable (here the file is gone before it could be opened).
func TestWriteSyncingReportsTheSync(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "record.json")
	for i := 0; i < 50; i++ {
		durable, err := WriteSyncing(p, []byte("x"), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(p)
		if err := durable(); err != nil {
			if !os.IsNotExist(err) {
				t.Fatalf("durable: %v; want the file's absence", err)
			}
			return
		}
	}
	t.Log("every sync ran before the file was removed: its failure was not reached")
}

func TestWriteCreatesAndReplaces(t *testing.T) {
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) { testCreatesAndReplaces(t, w.write) })
	}
}

func testCreatesAndReplaces(t *testing.T, write func(string, []byte, os.FileMode) error) {
	dir := t.TempDir()
	p := filepath.Join(dir, "record.json")
	old := linux.Umask(0o077)
	defer linux.Umask(old)
	for _, c := range []struct {
		data string
		perm os.FileMode
	}{{"first", 0o644}, {"second, longer", 0o600}, {"", 0o400}} {
		if err := write(p, []byte(c.data), c.perm); err != nil {
			t.Fatalf("write(%q): %v", c.data, err)
		}
		got, err := os.ReadFile(p)
		if err != nil || string(got) != c.data {
			t.Fatalf("content = %q, %v; want %q", got, err, c.data)
		}
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode().Perm() != c.perm || !fi.Mode().IsRegular() {
			t.Fatalf("mode = %v, %v; want a regular file of %v (the umask does not apply)", fi.Mode(), err, c.perm)
		}
	}
	if tmp := leftovers(t, dir); len(tmp) != 0 {
		t.Fatalf("temporary files left: %q", tmp)
	}
}

// TestWriteReplacesALinkNeverFollowsIt: a link planted at the record's name is
// replaced; what it points to is untouched.
func TestWriteReplacesALinkNeverFollowsIt(t *testing.T) {
	for _, w := range writers {
		t.Run(w.name, func(t *testing.T) { testReplacesALink(t, w.write) })
	}
}

func testReplacesALink(t *testing.T, write func(string, []byte, os.FileMode) error) {
	dir := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "owner.json")
	if err := os.Symlink(victim, p); err != nil {
		t.Fatal(err)
	}
	if err := write(p, []byte("record"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(victim); string(got) != "host" {
		t.Fatalf("the link's target was written: %q", got)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("%s is not a regular file after Write: %v, %v", p, fi.Mode(), err)
	}
}

func TestWriteFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "state")
	if err := os.Mkdir(p, 0o700); err != nil { // a rename over a directory fails
		t.Fatal(err)
	}
	if err := Write(p, []byte("x"), 0o600); err == nil {
		t.Fatal("Write over a directory succeeded")
	}
	if tmp := leftovers(t, dir); len(tmp) != 0 {
		t.Fatalf("temporary files left after a failure: %q", tmp)
	}
	if err := Write(filepath.Join(dir, "missing", "state"), []byte("x"), 0o600); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

func TestWriteOwned(t *testing.T) {
	testutil.RequireRoot(t)
	p := filepath.Join(t.TempDir(), "spec")
	if err := WriteOwned(p, []byte("spec"), 0o400, 12345, 23456); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 12345 || st.Gid != 23456 || fi.Mode().Perm() != 0o400 {
		t.Fatalf("owner %d:%d mode %v; want 12345:23456 0400", st.Uid, st.Gid, fi.Mode().Perm())
	}
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "lease")
	if err := Write(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("%s still there: %v", p, err)
	}
	if err := Remove(p); err != nil {
		t.Fatalf("Remove of a missing file = %v; want nil", err)
	}
}
