package fsdiff

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/cordonhq/cordon/internal/testutil"
)

// gitRepo makes w a git repository with every file committed, using the host's git
// (only to set the test up: fsdiff never runs it), and waits out the racy window.
func gitRepo(t *testing.T, w ws) {
	t.Helper()
	_, err := exec.LookPath("git")
	testutil.Require(t, err == nil, "git sets the test repository up (apt-get install git)")
	for _, args := range [][]string{{"init", "-q", "."}, {"add", "-A", "-f", "."}, {"commit", "-q", "-m", "base"}} {
		git(t, w.dir, args...)
	}
	time.Sleep(2 * racyWindow)
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@localhost",
		"-c", "core.hooksPath=/dev/null", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// bigTree returns ~n files in the shape of a source tree: text of varied sizes, some
// binaries, one file over MaxTextSize, and a .gitignore for build output.
func bigTree(n int) map[string]string {
	files := map[string]string{".gitignore": "/build/\n*.o\n"}
	for i := range n {
		var b strings.Builder
		for l := range 5 + i%40 {
			fmt.Fprintf(&b, "line %d of file %d\n", l, i)
		}
		if i%97 == 0 {
			b.WriteString("\x00\x01binary")
		}
		files[bigName(i)] = b.String()
	}
	files["pkg00/large.txt"] = strings.Repeat("large line of text\n", (DefaultMaxTextSize/19)+100)
	return files
}

func bigName(i int) string {
	if i%97 == 0 {
		return fmt.Sprintf("pkg%02d/data%05d.bin", i/500, i)
	}
	return fmt.Sprintf("pkg%02d/sub%d/file%05d.go", i/500, i%7, i)
}

// bigEdits are the same edits a command could make in the big tree: modify, delete,
// rename, add text and binary, chmod, a type change, a large file and ignored output.
func bigEdits(w ws) {
	w.write(bigName(1), "rewritten\nline 1 of file 1\n")
	w.do(os.Remove, bigName(504))
	w.do(os.Remove, bigName(97))
	w.do(func(p string) error { return os.Rename(p, w.path("pkg02/moved.go")) }, bigName(1500))
	w.write("pkg04/new.txt", "brand\nnew\n")
	w.write("pkg04/new.bin", "\x00new binary")
	w.do(func(p string) error { return os.Chmod(p, 0o755) }, bigName(2501))
	w.do(os.Remove, bigName(3003))
	w.do(func(p string) error { return os.Symlink("elsewhere.go", p) }, bigName(3003))
	w.write("pkg00/large.txt", "now small\n")
	w.write("build/out.o", "\x00object code")
	w.write("build/log.txt", "build log\n")
	w.write(bigName(3500), "edited again\n")
	w.do(os.RemoveAll, "pkg08")
}

// TestGitBaselineGolden: in a git workspace of ~11k files the baseline reads (almost)
// nothing, and the diff of the same edits is byte for byte the diff of a baseline that
// read every file.
func TestGitBaselineGolden(t *testing.T) {
	n := 11_000
	if testing.Short() {
		n = 4_500
	}
	w := newWS(t, bigTree(n))
	gitRepo(t, w)
	// Packed, with delta chains (the files are alike), so that old sides come from a
	// pack; git gc would do the same.
	git(t, w.dir, "repack", "-a", "-d", "-q", "--depth=50")
	if objs := git(t, w.dir, "count-objects", "-v"); !strings.Contains(objs, "\ncount: 0\n") && !strings.HasPrefix(objs, "count: 0\n") {
		t.Fatalf("loose objects left after repack:\n%s", objs)
	}
	// A file dirty before the run: its old side must be what the file held then.
	w.write(bigName(3500), "dirty before the command\n")
	time.Sleep(2 * racyWindow)
	ctx := context.Background()
	fast, err := New(ctx, w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	full, err := New(ctx, w.dir, Options{noGitIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := fast.Baseline().Read; got > 10 {
		t.Errorf("git baseline read %d files; want only the few the index does not vouch for", got)
	}
	if got := full.Baseline().Read; got < n {
		t.Errorf("full baseline read %d files; want every one (%d)", got, n)
	}
	bigEdits(w)
	a, err := fast.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := full.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Patch, b.Patch) {
		t.Errorf("patches differ:\n--- git baseline\n%s\n--- full baseline\n%s", a.Patch, b.Patch)
	}
	if !reflect.DeepEqual(a.Changes, b.Changes) || a.Insertions != b.Insertions || a.Deletions != b.Deletions {
		t.Errorf("changes differ:\n%+v\n%+v", a.Changes, b.Changes)
	}
	if len(a.Problems) != 0 {
		t.Errorf("problems: %v", a.Problems)
	}
	if len(a.Changes) < 14 {
		t.Errorf("got %d changes; the edits make more", len(a.Changes))
	}
}

// TestGitBaselineNoIndex: without a usable .git directory (a link to one, a gitdir:
// file) the baseline reads every file, as before.
func TestGitBaselineNoIndex(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, w ws)
	}{
		{"linked .git", func(t *testing.T, w ws) {
			real := filepath.Join(t.TempDir(), "real.git")
			w.do(func(p string) error { return os.Rename(p, real) }, ".git")
			w.do(func(p string) error { return os.Symlink(real, p) }, ".git")
		}},
		{"gitdir file", func(t *testing.T, w ws) {
			real := filepath.Join(t.TempDir(), "real.git")
			w.do(func(p string) error { return os.Rename(p, real) }, ".git")
			w.write(".git", "gitdir: "+real+"\n")
		}},
		{"index is a link", func(t *testing.T, w ws) {
			w.do(func(p string) error { return os.Rename(p, w.path("idx")) }, ".git/index")
			w.do(func(p string) error { return os.Symlink("../idx", p) }, ".git/index")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWS(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
			gitRepo(t, w)
			tc.setup(t, w)
			tr, err := New(context.Background(), w.dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := tr.Baseline().Read; got < 2 {
				t.Errorf("baseline read %d files; want both", got)
			}
		})
	}
}

// lieInIndex rewrites the index entry of name to claim the content of the blob oid
// with the file's current stat data: what an attacker who controls both can plant.
func lieInIndex(t *testing.T, w ws, name, oid string) {
	t.Helper()
	f, err := os.Open(w.path(".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	idx := &index.Index{}
	err = index.NewDecoder(f).Decode(idx)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	e, err := idx.Entry(name)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(w.path(name))
	if err != nil {
		t.Fatal(err)
	}
	key := keyOf(fi)
	e.Hash = hashOf(t, oid)
	e.Size = uint32(fi.Size())
	e.ModifiedAt = fi.ModTime()
	e.CreatedAt, e.Inode = indexStat(t, key)
	out, err := os.Create(w.path(".git/index"))
	if err != nil {
		t.Fatal(err)
	}
	if err := index.NewEncoder(out).Encode(idx); err != nil {
		t.Fatal(err)
	}
	out.Close()
	time.Sleep(2 * racyWindow)
}

func hashOf(t *testing.T, hexID string) (h [20]byte) {
	t.Helper()
	b, err := hex.DecodeString(strings.TrimSpace(hexID))
	if err != nil || len(b) != len(h) {
		t.Fatalf("object id %q: %v", hexID, err)
	}
	copy(h[:], b)
	return h
}

func mustDiff(t *testing.T, tr *Tracker) *Result {
	t.Helper()
	res, err := tr.Diff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestGitLyingIndex: the index claims content the file never had (stat data copied
// from the file). A command that writes the claimed content is not taken for
// "unchanged": it is reported as a rewrite; any other write shows as a modification.
func TestGitLyingIndex(t *testing.T) {
	w := newWS(t, map[string]string{"f.sh": "evil!\n", "g.sh": "evil!\n", "other": "x\n"})
	gitRepo(t, w)
	evil := git(t, w.dir, "rev-parse", "HEAD:f.sh")
	for _, name := range []string{"f.sh", "g.sh"} {
		w.write(name, "good!\n") // what the reviewer sees before the run
		time.Sleep(2 * racyWindow)
		lieInIndex(t, w, name, evil)
	}
	tr, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Baseline().Read; got != 0 {
		t.Fatalf("baseline read %d files; the attack needs the index trusted", got)
	}
	w.write("f.sh", "evil!\n")
	w.write("g.sh", "other\n")
	res := mustDiff(t, tr)
	if len(res.Changes) != 2 || res.Changes[0].Path != "f.sh" || res.Changes[1].Path != "g.sh" {
		t.Fatalf("changes %+v; want both writes reported", res.Changes)
	}
	if c := res.Changes[0]; c.Op != Modified || c.OldSHA256 != "" {
		t.Errorf("f.sh: %+v; want a modification with no claimed old digest", c)
	}
	if !bytes.Contains(res.Patch, []byte("File b/f.sh rewritten with the content the git index recorded")) {
		t.Errorf("patch does not say f.sh was rewritten:\n%s", res.Patch)
	}
}

// TestGitObjectsTampered: the command deletes or replaces the objects of the files it
// changes. The changes are still reported, without old content and with a problem;
// a replaced object never passes for the old content.
func TestGitObjectsTampered(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, w ws)
	}{
		{"objects deleted", func(t *testing.T, w ws) { w.do(os.RemoveAll, ".git/objects") }},
		{"object replaced", func(t *testing.T, w ws) {
			oid := strings.TrimSpace(git(t, w.dir, "rev-parse", "HEAD:a.txt"))
			other := strings.TrimSpace(git(t, w.dir, "rev-parse", "HEAD:b.txt"))
			obj := func(id string) string { return w.path(".git/objects/" + id[:2] + "/" + id[2:]) }
			data, err := os.ReadFile(obj(other))
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(obj(oid))
			if err := os.WriteFile(obj(oid), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"alternates to elsewhere", func(t *testing.T, w ws) {
			elsewhere := filepath.Join(t.TempDir(), "objects")
			w.do(func(p string) error { return os.Rename(p, elsewhere) }, ".git/objects")
			w.write(".git/objects/info/alternates", elsewhere+"\n")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWS(t, map[string]string{"a.txt": "a1\na2\n", "b.txt": "b1\n"})
			gitRepo(t, w)
			tr, err := New(context.Background(), w.dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			w.write("a.txt", "a1\nchanged\n")
			tc.tamper(t, w)
			res := mustDiff(t, tr)
			if len(res.Changes) != 1 || res.Changes[0].Path != "a.txt" || res.Changes[0].Op != Modified {
				t.Fatalf("changes %+v; want a.txt modified", res.Changes)
			}
			if !bytes.Contains(res.Patch, []byte("Files a/a.txt and b/a.txt differ (unreadable)")) {
				t.Errorf("patch:\n%s", res.Patch)
			}
			if len(res.Problems) != 1 || !strings.Contains(res.Problems[0], "a.txt: content before the command unavailable") {
				t.Errorf("problems %q", res.Problems)
			}
		})
	}
}

// TestGitIndexRewrittenDuringRun: the command rewrites .git/index (here, to claim
// its new content); the diff compares with the index read before it ran.
func TestGitIndexRewrittenDuringRun(t *testing.T) {
	w := newWS(t, map[string]string{"a.txt": "before\n"})
	gitRepo(t, w)
	tr, err := New(context.Background(), w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.write("a.txt", "after!\n")
	git(t, w.dir, "add", "a.txt")
	res := mustDiff(t, tr)
	if len(res.Changes) != 1 || !bytes.Contains(res.Patch, []byte("-before\n+after!\n")) {
		t.Errorf("changes %+v patch:\n%s", res.Changes, res.Patch)
	}
}

// TestGitLazyLoadsWithinMemoryBudget: the old content read from blobs at diff time is
// charged to Options.MaxRetained, as the scan's is: past it a blob is kept as a digest
// (Large), so a command that changes many big tracked files cannot make the diff hold
// all their old contents at once (red team: 2 GB against 1 GB without .git).
func TestGitLazyLoadsWithinMemoryBudget(t *testing.T) {
	files := map[string]string{}
	for i := range 4 {
		files[fmt.Sprintf("f%d.txt", i)] = strings.Repeat(fmt.Sprintf("line %d\n", i), 100) // 700 bytes
	}
	w := newWS(t, files)
	gitRepo(t, w)
	time.Sleep(2 * racyWindow)
	tr, err := New(context.Background(), w.dir, Options{MaxRetained: 1600})
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Baseline().Read; got != 0 {
		t.Fatalf("baseline read %d files; want them all from the index", got)
	}
	for name := range files {
		w.write(name, "changed\n")
	}
	res := mustDiff(t, tr)
	if len(res.Changes) != 4 {
		t.Fatalf("changes %+v; want the 4 files", res.Changes)
	}
	if n := bytes.Count(res.Patch, []byte("over the memory budget")); n != 2 {
		t.Errorf("%d files over the budget; want 2 (1,600 bytes hold two old sides of 700):\n%s", n, res.Patch)
	}
}
