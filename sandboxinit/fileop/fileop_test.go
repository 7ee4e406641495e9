package fileop

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// call runs Main with args and stdin and decodes its answer.
func call(t *testing.T, stdin string, args ...string) (Answer, int) {
	t.Helper()
	var out bytes.Buffer
	code := Main(args, strings.NewReader(stdin), &out)
	var a Answer
	if err := json.Unmarshal(out.Bytes(), &a); err != nil {
		t.Fatalf("%v: the answer %q is not JSON: %v", args, out.String(), err)
	}
	if (code == 0) != (a.Error == "") {
		t.Fatalf("%v: exit %d with error %q", args, code, a.Error)
	}
	return a, code
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f.txt")
	mustWrite(t, f, "one\ntwo\nthree\nfour")
	long := filepath.Join(dir, "long.txt")
	mustWrite(t, long, strings.Repeat("x", 3*MaxLineChars)+"\nshort\n")
	for _, c := range []struct {
		name              string
		args              []string
		content           string
		start, end, total int
		truncated         bool
	}{
		{"whole", []string{f}, "one\ntwo\nthree\nfour", 1, 4, 4, false},
		{"range", []string{"--offset", "2", "--limit", "2", f}, "two\nthree\n", 2, 3, -1, false},
		{"past the end", []string{"--offset", "9", f}, "", 9, 8, 4, false},
		{"cap", []string{"--max-chars", "9", f}, "one\ntwo\n", 1, 2, -1, true},
		{"long line cut", []string{"--limit", "1", long}, strings.Repeat("x", MaxLineChars) + " [line cut by cordon]\n", 1, 1, -1, true},
		{"after a long line", []string{"--offset", "2", long}, "short\n", 2, 2, 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _ := call(t, "", append([]string{OpRead}, c.args...)...)
			r := a.Read
			if r == nil || r.Content != c.content || r.StartLine != c.start || r.EndLine != c.end || r.TotalLines != c.total || r.Truncated != c.truncated {
				t.Errorf("got %+v; want content %q lines %d-%d of %d, truncated %v", r, c.content, c.start, c.end, c.total, c.truncated)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	mustWrite(t, bin, "text\x00more")
	latin := filepath.Join(dir, "latin1")
	mustWrite(t, latin, "caf\xe9\n")
	dash := filepath.Join(dir, "-rf")
	mustWrite(t, dash, "dash\n")
	for _, c := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"binary", "", []string{OpRead, bin}, "binary"},
		{"not UTF-8", "", []string{OpRead, latin}, "not UTF-8"},
		{"a directory", "", []string{OpRead, dir}, "not a regular file (dir)"},
		{"missing", "", []string{OpRead, filepath.Join(dir, "nope")}, "no such file"},
		{"edit absent", `{"old":"zzz","new":"y"}`, []string{OpEdit, dash}, "not found"},
		{"edit empty old", `{"old":"","new":"y"}`, []string{OpEdit, dash}, "empty"},
		{"edit unknown field", `{"old":"a","neww":"y"}`, []string{OpEdit, dash}, "unknown field"},
		{"edit binary", `{"old":"text","new":"y"}`, []string{OpEdit, bin}, "binary"},
		{"list a file", "", []string{OpList, dash}, "not a directory"},
		{"unknown op", "", []string{"chmod", dash}, "unknown operation"},
		{"two paths", "", []string{OpRead, dash, dash}, "one PATH"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _ := call(t, c.stdin, c.args...)
			if !strings.Contains(a.Error, c.want) {
				t.Errorf("error %q; want it to say %q", a.Error, c.want)
			}
		})
	}
	// A path that looks like a flag is a path after "--".
	if a, _ := call(t, "", OpRead, "--", dash); a.Read == nil || a.Read.Content != "dash\n" {
		t.Errorf("read -- -rf: %+v", a)
	}
}

func TestWriteAndEdit(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a", "b", "f.txt")
	a, _ := call(t, "x = 1\ny = 1\n", OpWrite, p)
	if a.Write == nil || !a.Write.Created || a.Write.Bytes != 12 {
		t.Fatalf("write: %+v", a)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	a, _ = call(t, `{"old":"= 1","new":"= 2"}`, OpEdit, p)
	if !strings.Contains(a.Error, "found 2 times") {
		t.Errorf("a non-unique edit: %+v", a)
	}
	a, _ = call(t, `{"old":"x = 1","new":"x = 2"}`, OpEdit, p)
	if a.Edit == nil || a.Edit.Replacements != 1 {
		t.Errorf("edit: %+v", a)
	}
	a, _ = call(t, `{"old":"1","new":"3","replace_all":true}`, OpEdit, p)
	if a.Edit == nil || a.Edit.Replacements != 1 {
		t.Errorf("replace_all: %+v", a)
	}
	got, _ := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if string(got) != "x = 2\ny = 3\n" || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file is %q, mode %v; want the edits, mode kept", got, fi.Mode())
	}
	a, _ = call(t, "short\n", OpWrite, p)
	if got, _ := os.ReadFile(p); a.Write == nil || a.Write.Created || string(got) != "short\n" {
		t.Errorf("a rewrite left %q: %+v", got, a)
	}
	big := strings.NewReader(strings.Repeat("b", MaxWrite+1))
	var out bytes.Buffer
	if code := Main([]string{OpWrite, filepath.Join(dir, "big")}, big, &out); code != 1 || !strings.Contains(out.String(), "passes") {
		t.Errorf("an oversized write: exit %d, %s", code, out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "big")); err == nil {
		t.Error("an oversized write made the file")
	}
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a.txt", "sub/b.txt", "sub/deep/c.txt", ".git/HEAD", ".git/objects/x"} {
		mustWrite(t, filepath.Join(dir, p), "x")
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	a, _ := call(t, "", OpList, dir)
	if got := paths(a.List); got != ".git:dir a.txt:file link:symlink sub:dir" {
		t.Errorf("list: %s", got)
	}
	a, _ = call(t, "", OpList, "--recursive", dir)
	if got := paths(a.List); got != ".git:dir a.txt:file link:symlink sub:dir sub/b.txt:file sub/deep:dir sub/deep/c.txt:file" || a.List.Skipped != 1 {
		t.Errorf("recursive list (the link not followed, .git not entered): %s, skipped %d", got, a.List.Skipped)
	}
	a, _ = call(t, "", OpList, "--recursive", "--max-entries", "3", dir)
	if len(a.List.Entries) != 3 || !a.List.Truncated {
		t.Errorf("a capped list: %d entries, truncated %v", len(a.List.Entries), a.List.Truncated)
	}
}

func paths(l *Listing) string {
	if l == nil {
		return "<nil>"
	}
	var s []string
	for _, e := range l.Entries {
		s = append(s, e.Path+":"+e.Type)
	}
	return strings.Join(s, " ")
}
