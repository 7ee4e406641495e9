package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
)

func mkfifo(p string) error { return linux.Mkfifo(p, 0o600) }

// FuzzUnpack unpacks arbitrary bytes into an empty workspace beside a directory it
// must never touch, and checks what it made: nothing outside, no special file, no
// set-id or sticky bit, no link whose target leaves the workspace, no more than the
// limits; and every failure is an EntryError or a refusal of the file system.
func FuzzUnpack(f *testing.F) {
	for _, seed := range [][]entry{
		{{name: "a/b", typ: tar.TypeReg, data: "x"}, {name: "l", typ: tar.TypeSymlink, link: "a"}, {name: "l/c", typ: tar.TypeReg}},
		{{name: "../x", typ: tar.TypeReg}},
		{{name: "h", typ: tar.TypeLink, link: "../outside/secret"}},
		{{name: "d/", typ: tar.TypeDir, mode: 0o4755}, {name: "p", typ: tar.TypeFifo}},
		{{name: "f", typ: tar.TypeReg, data: "data"}, {name: "g", typ: tar.TypeLink, link: "f"}},
		{{name: "a/b/l", typ: tar.TypeSymlink, link: "../../outside"}, {name: "h", typ: tar.TypeLink, link: "a/b/l"}},
		{{name: "a/l", typ: tar.TypeSymlink, link: ".."}, {name: "e", typ: tar.TypeSymlink, link: "a/l/../outside"}},
	} {
		f.Add(archive(f, seed...))
	}
	lim := Limits{Bytes: 4096, Entries: 32}
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, outside := sandbox(t)
		st, err := Unpack(bytes.NewReader(data), ws, lim)
		var ee *EntryError
		if err != nil && !errors.As(err, &ee) && !strings.HasPrefix(err.Error(), "unpacking ") {
			t.Fatalf("Unpack: %v (neither an EntryError nor the file system's)", err)
		}
		if st.Entries > lim.Entries || st.Bytes > lim.Bytes {
			t.Fatalf("stats %+v past %+v", st, lim)
		}
		assertOutsideUntouched(t, outside)
		var bytes int64
		seen := map[uint64]bool{} // hard links count once
		err = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			m := fi.Mode()
			if m&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
				t.Errorf("%s: mode %v", p, m)
			}
			switch {
			case m.IsRegular():
				if ino := fi.Sys().(*syscall.Stat_t).Ino; !seen[ino] {
					seen[ino] = true
					bytes += fi.Size()
				}
			case m.IsDir():
			case m&os.ModeSymlink != 0:
				target, _ := os.Readlink(p)
				rel, _ := filepath.Rel(ws, p)
				if !linkStaysInside(filepath.ToSlash(rel), target) {
					t.Errorf("%s: a link to %q", p, target)
				}
				// Resolved by the file system, through the workspace's other links.
				real, _ := filepath.EvalSymlinks(ws)
				if to, err := filepath.EvalSymlinks(p); err == nil && to != real && !strings.HasPrefix(to, real+"/") {
					t.Errorf("%s: a link to %q resolves to %s, outside", p, target, to)
				}
			default:
				t.Errorf("%s: a special file (%v)", p, m)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if bytes > lim.Bytes {
			t.Errorf("%d bytes made; the limit is %d", bytes, lim.Bytes)
		}
	})
}
