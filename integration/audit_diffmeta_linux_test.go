package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
)

// What a sandboxed command changes of the workspace's metadata lands on the host, so
// the diff shows it, and a staged run's apply carries it or says it does not: an
// extended attribute, an mtime moved to the past or the future alone (which steers
// make), chmod +x, a sticky bit, an empty directory made and one removed. A set-id
// bit cannot be set at all (seccomp refuses the mode): the attempt must fail and
// change nothing.

const metaAttack = `python3 -c "import os; os.setxattr('a.txt', 'user.cordon', b'planted'); os.setxattr('nd', 'user.dir', b'd')" 2>/dev/null || exit 9` +
	`; touch -m -d 2001-02-03T04:05:06Z old.c; touch -m -d 2099-01-01T00:00:00Z new.c` +
	`; chmod +x x.sh; chmod +t st; mkdir newempty; rmdir gone` +
	`; if chmod u+s s.bin 2>/dev/null; then echo SETID-SET; exit 8; fi`

func metaWorkspace(t *testing.T, ws string) {
	for name, content := range map[string]string{"a.txt": "a\n", "old.c": "int a;\n", "new.c": "int b;\n",
		"x.sh": "#!/bin/sh\n", "s.bin": "s\n", "nd/f": "f\n"} {
		mustWrite(t, filepath.Join(ws, name), content)
	}
	mustMkdir(t, filepath.Join(ws, "gone"))
	mustMkdir(t, filepath.Join(ws, "st"))
}

// metaShown checks that the timeline of run id shows every metadata change.
func metaShown(t *testing.T, w *world, id string) {
	t.Helper()
	show := w.cordon("", "audit", "show", "--diff", id)
	if show.code != 0 {
		t.Fatalf("audit show: %v", show)
	}
	for _, want := range []string{
		`M a.txt xattrs +"user.cordon"`, `M nd (dir) xattrs +"user.dir"`,
		`T old.c mtime `, `-> 2001-02-03T04:05:06Z`, `T new.c mtime `, `-> 2099-01-01T00:00:00Z`,
		`M x.sh mode 100644 -> 100755`, `M st (dir) mode 040755 -> 041755`,
		`A newempty (dir)`, `D gone (dir)`,
		"xattr added user.cordon (7 bytes sha256:", "new directory mode 040755", "deleted directory mode 040755",
	} {
		assertContains(t, "audit show of the run", show.stdout, want)
	}
	// The command line names both once.
	if strings.Count(show.stdout, "planted") != 1 {
		t.Errorf("an attribute's value is in the timeline:\n%s", show.stdout)
	}
	if strings.Count(show.stdout, "s.bin") != 1 {
		t.Errorf("the refused set-id attempt changed s.bin:\n%s", show.stdout)
	}
}

func TestDiffShowsMetadataChanges(t *testing.T) {
	w := newWorld(t)
	w.env = append(w.env, "CORDON_AUDIT_DIR="+t.TempDir())
	metaWorkspace(t, w.ws)
	if r := w.cordon("", "run", "--", "sh", "-c", metaAttack); r.code != 0 {
		t.Fatalf("run: %v", r)
	}
	metaShown(t, w, "last")
}

func TestStagedApplyCarriesMetadata(t *testing.T) {
	w := newStageWorld(t)
	metaWorkspace(t, w.ws)
	id := w.stage(metaAttack)
	metaShown(t, w.world, id)
	r := w.cordon("", "apply", id)
	if r.code != 0 {
		t.Fatalf("apply: %v", r)
	}
	// Carried: the attribute, the times, the execute bit, the directories.
	if v, err := linux.Getxattr(filepath.Join(w.ws, "a.txt"), "user.cordon"); err != nil || len(v) != 7 {
		t.Errorf("a.txt's user.cordon after apply: %q, %v", v, err)
	}
	if v, err := linux.Getxattr(filepath.Join(w.ws, "nd"), "user.dir"); err != nil || v == "" {
		t.Errorf("nd's user.dir after apply: %q, %v", v, err)
	}
	for name, want := range map[string]time.Time{"old.c": time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC),
		"new.c": time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if fi, err := os.Stat(filepath.Join(w.ws, name)); err != nil || !fi.ModTime().Equal(want) {
			t.Errorf("%s's mtime after apply: %v, want %v (%v)", name, fi.ModTime(), want, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(w.ws, "x.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("x.sh after apply: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(w.ws, "newempty")); err != nil || !fi.IsDir() {
		t.Errorf("newempty after apply: %v", err)
	}
	assertAbsent(t, filepath.Join(w.ws, "gone"))
	// Refused, and said so: the sticky bit (root landing mode bits beyond rwx is
	// never done).
	if fi, err := os.Stat(filepath.Join(w.ws, "st")); err != nil || fi.Mode()&os.ModeSticky != 0 {
		t.Errorf("st after apply: %v %v: the sticky bit landed", fi.Mode(), err)
	}
	assertContains(t, "apply's output", r.stdout+r.stderr, "st: set-id or sticky bits")
	w.verify(id)
}

// TestContainerDiffMetadata runs the metadata attack on every container backend (the
// host view: the same tools as bwrap's).
func TestContainerDiffMetadata(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, backend string) {
		t.Run("direct", TestDiffShowsMetadataChanges)
		t.Run("staged", TestStagedApplyCarriesMetadata)
	})
}
