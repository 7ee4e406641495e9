package fsdiff

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
)

// Red-team attacks on the walk (scan.go, internal/linux/walk_linux.go): a process in the
// workspace races the walk, swapping a directory for a link to a host directory and
// back. Nothing of the host directory may reach a snapshot (as a path, a problem or
// patch content), and the files that are really there must not be lost.

// swapper swaps the directory rel of w for a symbolic link to target and back, as fast
// as it can, until stop is called; it returns how many swaps it made.
func swapper(t *testing.T, w ws, rel, target string) (stop func() int) {
	t.Helper()
	p, hide := w.path(rel), w.path(rel+".real")
	done := make(chan struct{})
	var n int
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if os.Rename(p, hide) != nil {
				continue
			}
			_ = os.Symlink(target, p)
			_ = os.Remove(p)
			if err := os.Rename(hide, p); err != nil {
				t.Errorf("putting %s back: %v", rel, err)
				return
			}
			n++
		}
	})
	return func() int {
		close(done)
		wg.Wait()
		return n
	}
}

// hostLeak fails if res shows anything under d/ but the workspace's own d/ files, or
// content of the host directory.
func hostLeak(t *testing.T, what string, res *Result, own map[string]bool, hostText []string) {
	t.Helper()
	for _, c := range res.Changes {
		for _, p := range []string{c.Path, c.OldPath} {
			if strings.HasPrefix(p, "d/") && !own[p] {
				t.Errorf("%s: a host entry reached the diff: %+v", what, c)
			}
		}
	}
	for _, pr := range res.Problems {
		if rel, _, _ := strings.Cut(pr, ":"); strings.HasPrefix(rel, "d/") && !own[rel] {
			t.Errorf("%s: a host entry reached the problems: %q", what, pr)
		}
	}
	for _, s := range hostText {
		if bytes.Contains(res.Patch, []byte(s)) {
			t.Errorf("%s: the patch holds host content %q:\n%s", what, s, res.Patch)
		}
	}
}

// TestRedRunWalkSwapToHost: while the directory d is swapped for a link to /etc or
// /proc/self and back, baselines and diffs never list, read or report the host
// directory's entries; once the swapping stops, a diff against a baseline taken during
// it holds only the workspace's own files. Directories beyond maxPreOpened (opened by
// path from the top) are raced the same way.
func TestRedRunWalkSwapToHost(t *testing.T) {
	for _, target := range []string{"/etc", "/proc/self"} {
		t.Run(strings.ReplaceAll(target, "/", "_"), func(t *testing.T) {
			files := map[string]string{"d/a": "a\n", "d/sub/c": "c\n", "top.txt": "t\n"}
			for i := range maxPreOpened + 8 {
				// Siblings queued before d: d and d/sub are opened by path.
				files[fmt.Sprintf("a%04d/x", i)] = "x\n"
			}
			w := newWS(t, files)
			own := map[string]bool{"d": true, "d/a": true, "d/sub": true, "d/sub/c": true, "d.real": true}
			for k := range files {
				own[k] = true
			}
			hostText := []string{"root:x:0:0", "PATH=", "VmRSS"}
			ctx := context.Background()
			stop := swapper(t, w, "d", target)
			raced := 0 // walks that met the swap (logged: how often is up to the scheduler)
			for i := range 30 {
				tr, err := New(ctx, w.dir, Options{Workers: 2})
				if err != nil {
					t.Fatal(err)
				}
				res, err := tr.Diff(ctx)
				if err != nil {
					t.Fatal(err)
				}
				hostLeak(t, fmt.Sprintf("round %d", i), res, own, hostText)
				if len(res.Problems) > 0 {
					raced++
				}
				if t.Failed() {
					break
				}
			}
			tr, err := New(ctx, w.dir, Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d swaps; %d of 30 rounds reported a problem", stop(), raced)
			res, err := tr.Diff(ctx)
			if err != nil {
				t.Fatal(err)
			}
			hostLeak(t, "after the swapping", res, own, hostText)
			for _, c := range res.Changes {
				// The baseline may have caught d as the link it was for a moment (its
				// target readable, or swapped away before it was read: Unreadable, with
				// a link's mode): that link's deletion is true. A deleted entry that is
				// there now, as what it was, is not.
				if c.Op != Deleted {
					continue
				}
				wasLink := c.Kind == Symlink || c.OldMode&0o170000 == 0o120000
				if fi, err := os.Lstat(w.path(c.Path)); err == nil && !wasLink && fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("after the swapping: a file still there is reported deleted: %+v", c)
				}
			}
		})
	}
}

// TestRedRunWalkSpecialNames: FIFOs, a listening socket, and names holding newlines,
// patch headers or terminal escapes are recorded without blocking, and cannot forge a
// patch header line of their own.
func TestRedRunWalkSpecialNames(t *testing.T) {
	w := newWS(t, map[string]string{"keep": "k\n"})
	ctx := context.Background()
	tr, err := New(ctx, w.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	evil := "x\ndiff --git a/forged b/forged\nnew file mode 100644\n+++ b/forged"
	w.write(evil, "payload\n")
	w.write("esc\x1b]0;title\x07", "e\n")
	w.do(func(p string) error { return linux.Mkfifo(p, 0o600) }, "fifo")
	sock := filepath.Join(w.dir, "sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	res, err := tr.Diff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 4 {
		t.Errorf("changes: %+v", res.Changes)
	}
	for _, line := range strings.Split(string(res.Patch), "\n") {
		if strings.HasPrefix(line, "diff --git a/forged") || strings.HasPrefix(line, "+++ b/forged") {
			t.Errorf("a file name forged a patch header line %q:\n%s", line, res.Patch)
		}
		if strings.ContainsRune(line, 0x1b) {
			t.Errorf("an escape reached the patch raw: %q", line)
		}
	}
}
