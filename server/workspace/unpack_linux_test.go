package workspace

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is one tar entry a test writes.
type entry struct {
	name, link, data string
	typ              byte
	mode             int64
}

func archive(t testing.TB, es ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		size := int64(len(e.data))
		if e.typ != tar.TypeReg {
			size = 0
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: size}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if size > 0 {
			if _, err := io.WriteString(tw, e.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var testLimits = Limits{Bytes: 1 << 20, Entries: 100}

// sandbox makes top/ws (empty, the workspace) and top/outside/secret, and returns
// both directories.
func sandbox(t *testing.T) (ws, outside string) {
	t.Helper()
	top := t.TempDir()
	ws, outside = filepath.Join(top, "ws"), filepath.Join(top, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	return ws, outside
}

func TestUnpack(t *testing.T) {
	ws, _ := sandbox(t)
	data := archive(t,
		entry{name: "./", typ: tar.TypeDir, mode: 0o755},
		entry{name: "src/", typ: tar.TypeDir, mode: 0o750},
		entry{name: "src/main.go", typ: tar.TypeReg, data: "package main\n", mode: 0o640},
		entry{name: "deep/er/file", typ: tar.TypeReg, data: "x"}, // parents not listed
		entry{name: "src/link", typ: tar.TypeSymlink, link: "main.go"},
		entry{name: "hard", typ: tar.TypeLink, link: "src/main.go"},
		entry{name: "run.sh", typ: tar.TypeReg, data: "#!/bin/sh\n", mode: 0o755},
	)
	st, err := Unpack(bytes.NewReader(data), ws, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if st.Entries != 8 || st.Bytes != int64(len("package main\n")+1+len("#!/bin/sh\n")) {
		t.Errorf("stats %+v", st)
	}
	got, err := os.ReadFile(filepath.Join(ws, "src/main.go"))
	if err != nil || string(got) != "package main\n" {
		t.Fatalf("src/main.go: %q, %v", got, err)
	}
	for rel, want := range map[string]os.FileMode{"src": os.ModeDir | 0o750, "src/main.go": 0o640, "run.sh": 0o755, "deep/er": os.ModeDir | 0o755} {
		fi, err := os.Lstat(filepath.Join(ws, rel))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", rel, fi.Mode(), err, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(ws, "src/link")); err != nil || l != "main.go" {
		t.Errorf("src/link: %q, %v", l, err)
	}
	a, _ := os.Stat(filepath.Join(ws, "hard"))
	b, _ := os.Stat(filepath.Join(ws, "src/main.go"))
	if !os.SameFile(a, b) {
		t.Error("hard is not a hard link of src/main.go")
	}
}

func TestUnpackRefuses(t *testing.T) {
	big := strings.Repeat("a", 600)
	for _, c := range []struct {
		name    string
		entries []entry
		is      error
		entry   string // the entry the error names
	}{
		{"dot-dot", []entry{{name: "../evil", typ: tar.TypeReg, data: "x"}}, ErrRefused, "../evil"},
		{"dot-dot inside", []entry{{name: "a/../../evil", typ: tar.TypeReg, data: "x"}}, ErrRefused, "a/../../evil"},
		{"absolute", []entry{{name: "/tmp/evil", typ: tar.TypeReg, data: "x"}}, ErrRefused, "/tmp/evil"},
		{"symlink out, absolute", []entry{{name: "l", typ: tar.TypeSymlink, link: "/etc"}}, ErrRefused, "l"},
		{"symlink out, relative", []entry{{name: "a/l", typ: tar.TypeSymlink, link: "../../outside"}}, ErrRefused, "a/l"},
		{"file through a symlink", []entry{
			{name: "l", typ: tar.TypeSymlink, link: "d"},
			{name: "d/", typ: tar.TypeDir},
			{name: "l/file", typ: tar.TypeReg, data: "x"},
		}, ErrRefused, "l/file"},
		{"symlink replacing a directory", []entry{
			{name: "d/", typ: tar.TypeDir},
			{name: "d", typ: tar.TypeSymlink, link: "."},
		}, ErrRefused, "d"},
		{"hard link out", []entry{{name: "h", typ: tar.TypeLink, link: "../outside/secret"}}, ErrRefused, "h"},
		{"hard link absolute", []entry{{name: "h", typ: tar.TypeLink, link: "/etc/passwd"}}, ErrRefused, "h"},
		{"hard link to nothing", []entry{{name: "h", typ: tar.TypeLink, link: "missing"}}, ErrRefused, "h"},
		{"hard link through a symlink", []entry{
			{name: "l", typ: tar.TypeSymlink, link: "."},
			{name: "f", typ: tar.TypeReg, data: "x"},
			{name: "h", typ: tar.TypeLink, link: "l/f"},
		}, ErrRefused, "h"},
		{"hard link moving a symlink up", []entry{
			{name: "a/b/l", typ: tar.TypeSymlink, link: "../../x"},
			{name: "h", typ: tar.TypeLink, link: "a/b/l"},
		}, ErrRefused, "h"},
		{"symlink climbing out through a symlink", []entry{
			{name: "a/b/l", typ: tar.TypeSymlink, link: "../.."},
			{name: "esc", typ: tar.TypeSymlink, link: "a/b/l/../../outside"},
		}, ErrRefused, "esc"},
		{"symlink climbing through a symlink made later", []entry{
			{name: "esc", typ: tar.TypeSymlink, link: "a/b/l/../../outside"},
			{name: "a/b/l", typ: tar.TypeSymlink, link: "../.."},
		}, ErrRefused, "esc"},
		{"char device", []entry{{name: "null", typ: tar.TypeChar}}, ErrRefused, "null"},
		{"block device", []entry{{name: "sda", typ: tar.TypeBlock}}, ErrRefused, "sda"},
		{"fifo", []entry{{name: "p", typ: tar.TypeFifo}}, ErrRefused, "p"},
		{"setuid", []entry{{name: "su", typ: tar.TypeReg, data: "x", mode: 0o4755}}, ErrRefused, "su"},
		{"setgid dir", []entry{{name: "g/", typ: tar.TypeDir, mode: 0o2755}}, ErrRefused, "g/"},
		{"sticky", []entry{{name: "s/", typ: tar.TypeDir, mode: 0o1777}}, ErrRefused, "s/"},
		{"long path", []entry{{name: strings.Repeat("a/", 300) + "f", typ: tar.TypeReg, data: "x"}}, ErrRefused, strings.Repeat("a/", 300) + "f"},
		{"long component", []entry{{name: big, typ: tar.TypeReg, data: "x"}}, ErrRefused, big},
		{"too many bytes", []entry{{name: "a", typ: tar.TypeReg, data: strings.Repeat("x", 600)}, {name: "b", typ: tar.TypeReg, data: strings.Repeat("x", 600)}}, ErrTooLarge, "b"},
		{"too many entries", manyEntries(11), ErrTooLarge, "f10"},
		{"too many implicit directories", []entry{{name: "a/b/c/d/e/f/g/h/i/j/k/l", typ: tar.TypeReg}}, ErrTooLarge, "a/b/c/d/e/f/g/h/i/j/k/l"},
		{"file over a directory", []entry{{name: "d/", typ: tar.TypeDir}, {name: "d", typ: tar.TypeReg, data: "x"}}, ErrRefused, "d"},
		{"the workspace itself as a file", []entry{{name: ".", typ: tar.TypeReg, data: "x"}}, ErrRefused, "."},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws, outside := sandbox(t)
			_, err := Unpack(bytes.NewReader(archive(t, c.entries...)), ws, Limits{Bytes: 1000, Entries: 10})
			var ee *EntryError
			if !errors.As(err, &ee) || !errors.Is(err, c.is) {
				t.Fatalf("Unpack = %v; want an EntryError matching %v", err, c.is)
			}
			if ee.Entry != c.entry {
				t.Errorf("the error names %q; want %q", ee.Entry, c.entry)
			}
			assertOutsideUntouched(t, outside)
		})
	}
}

func manyEntries(n int) []entry {
	var es []entry
	for i := range n {
		es = append(es, entry{name: "f" + string(rune('0'+i/10)) + string(rune('0'+i%10)), typ: tar.TypeReg})
	}
	es[n-1].name = "f10"
	return es
}

// assertOutsideUntouched checks the directory beside the workspace holds its secret
// alone, unchanged, and that nothing was made beside the two.
func assertOutsideUntouched(t *testing.T, outside string) {
	t.Helper()
	names, err := os.ReadDir(outside)
	if err != nil || len(names) != 1 {
		t.Errorf("outside holds %v, %v", names, err)
	}
	if got, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(got) != "SECRET" {
		t.Errorf("outside/secret: %q, %v", got, err)
	}
	top, err := os.ReadDir(filepath.Dir(outside))
	if err != nil || len(top) != 2 {
		t.Errorf("beside the workspace: %v, %v", top, err)
	}
	if _, err := os.Lstat("/tmp/evil"); err == nil {
		t.Error("/tmp/evil was made")
	}
}

func TestUnpackMalformed(t *testing.T) {
	ws, _ := sandbox(t)
	data := archive(t, entry{name: "f", typ: tar.TypeReg, data: strings.Repeat("x", 2000)})
	_, err := Unpack(bytes.NewReader(data[:1024]), ws, testLimits) // cut in the file's data
	if err == nil {
		t.Fatal("a truncated archive unpacked")
	}
	if _, err := Unpack(strings.NewReader(strings.Repeat("junk", 200)), ws, testLimits); !errors.Is(err, ErrMalformed) {
		t.Fatalf("junk: %v; want ErrMalformed", err)
	}
}

func TestPackRoundTrip(t *testing.T) {
	ws, _ := sandbox(t)
	data := archive(t,
		entry{name: "src/", typ: tar.TypeDir, mode: 0o750},
		entry{name: "src/main.go", typ: tar.TypeReg, data: "package main\n", mode: 0o640},
		entry{name: "src/link", typ: tar.TypeSymlink, link: "main.go"},
		entry{name: "top", typ: tar.TypeReg, data: "top"},
	)
	if _, err := Unpack(bytes.NewReader(data), ws, testLimits); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "out")); err != nil { // a sandbox's link out
		t.Fatal(err)
	}
	if err := mkfifo(filepath.Join(ws, "fifo")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st, skipped, err := Pack(&out, ws, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if skipped != 1 || st.Entries != 5 {
		t.Errorf("stats %+v, %d skipped; want 5 entries, the FIFO skipped", st, skipped)
	}
	got := map[string]string{}
	tr := tar.NewReader(&out)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got[hdr.Name] = string(hdr.Typeflag) + " " + hdr.Linkname + " " + string(body)
	}
	want := map[string]string{
		"out": "2 /etc/passwd ", "src/": "5  ", "src/link": "2 main.go ",
		"src/main.go": "0  package main\n", "top": "0  top",
	}
	if len(got) != len(want) {
		t.Errorf("entries %v; want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q; want %q", k, got[k], v)
		}
	}
	if _, _, err := Pack(io.Discard, ws, Limits{Bytes: 5, Entries: 100}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Pack past the byte limit: %v", err)
	}
	if _, _, err := Pack(io.Discard, ws, Limits{Bytes: 100, Entries: 2}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Pack past the entry limit: %v", err)
	}
}

// TestPackDepth: a tree deeper than an upload may be (a sandbox made it) ends the
// pack with ErrTooLarge, before a descriptor is held for every level of it.
func TestPackDepth(t *testing.T) {
	for _, c := range []struct {
		depth int
		err   error
	}{{MaxDepth, nil}, {MaxDepth + 1, ErrTooLarge}} {
		ws := t.TempDir()
		if err := os.MkdirAll(filepath.Join(ws, strings.Repeat("d/", c.depth)), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, _, err := Pack(io.Discard, ws, Limits{Bytes: 1 << 20, Entries: 1000}); !errors.Is(err, c.err) {
			t.Errorf("a tree %d deep: %v; want %v", c.depth, err, c.err)
		}
	}
}

func TestCheckGit(t *testing.T) {
	commit := strings.Repeat("a1", 20)
	for _, c := range []struct {
		url, commit string
		ok          bool
	}{
		{"https://example.com/r.git", commit, true},
		{"http://127.0.0.2:8080/r.git", commit, true},
		{"https://example.com/r.git", strings.Repeat("0f", 32), true},
		{"https://example.com/r.git", "main", false},
		{"https://example.com/r.git", strings.ToUpper(commit), false},
		{"https://example.com/r.git", commit[:39], false},
		{"ext::sh -c touch% /tmp/pwned", commit, false},
		{"file:///etc", commit, false},
		{"/srv/repo", commit, false},
		{"--upload-pack=touch /tmp/x", commit, false},
		{"ssh://git@example.com/r", commit, false},
		{"https://-oProxyCommand=x/r", commit, false},
		{"https://user:pw@example.com/r", commit, false},
		{"https:///r", commit, false},
		{"https://example.com/r\n", commit, false},
		{"https://example.com/a b", commit, false},
	} {
		err := CheckGit(c.url, c.commit)
		if (err == nil) != c.ok {
			t.Errorf("CheckGit(%q, %q) = %v; want ok %v", c.url, c.commit, err, c.ok)
		}
	}
}

// TestPackWideDirectory: a directory wider than a pack's batch of names is packed in
// name order, every entry once; the entries a download leaves out (FIFOs) count
// against the entries bound too, so a directory of them past it ends the pack with
// ErrTooLarge instead of being listed whole.
func TestPackWideDirectory(t *testing.T) {
	ws, _ := sandbox(t)
	const n = 2*dirBatch + 7
	for i := range n {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%05d", (i*7919)%n)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	st, _, err := Pack(&out, ws, Limits{Bytes: 1 << 20, Entries: n})
	if err != nil || st.Entries != n {
		t.Fatalf("pack: %+v %v; want %d entries", st, err, n)
	}
	tr := tar.NewReader(&out)
	for i := 0; ; i++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			if i != n {
				t.Errorf("%d entries; want %d", i, n)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("f%05d", i); hdr.Name != want {
			t.Fatalf("entry %d is %q; want %q", i, hdr.Name, want)
		}
	}

	fifos, _ := sandbox(t)
	for i := range 20 {
		if err := mkfifo(filepath.Join(fifos, fmt.Sprintf("p%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, skipped, err := Pack(io.Discard, fifos, Limits{Bytes: 1 << 20, Entries: 10}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("20 FIFOs past an entries bound of 10: %d skipped, %v; want ErrTooLarge", skipped, err)
	}
}
