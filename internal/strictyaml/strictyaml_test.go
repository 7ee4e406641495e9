package strictyaml

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// decode runs a small schema (name: string, n: integer, items: list of strings) over
// src and returns the problems, one per line.
func decode(t *testing.T, src string) string {
	t.Helper()
	top, d, err := Parse("f.yaml", []byte(src), Doc{Empty: "empty file: want name", Second: "one document, please"})
	if err != nil {
		return err.Error()
	}
	d.Mapping(top, "top",
		Field{Name: "name", Decode: func(n *yaml.Node) { d.Str(n, "name") }},
		Field{Name: "n", Decode: func(n *yaml.Node) { d.Int(n, "n", 1, 9) }},
		Field{Name: "items", Decode: func(n *yaml.Node) { d.List(n, "items", func(i *yaml.Node) { d.Str(i, "item") }) }},
	)
	if err := d.Err(); err != nil {
		return err.Error()
	}
	return ""
}

func TestDecoder(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"name: a\nn: 3\nitems: [x, y]\n", ""},
		{"", "f.yaml: empty file: want name"},
		{"name: [\n", "f.yaml:1:1: invalid YAML: did not find expected node content"},
		{"name: a\nname: b\n", `f.yaml:2:1: top: duplicate key "name" (first at line 1)`},
		{"nam: a\n", `f.yaml:1:1: top: unknown key "nam" (known: name, n, items)`},
		{"name: 12\nn: x\n", "f.yaml:1:7: name: want a string, got \"12\" (quote it)\nf.yaml:2:4: n: want an integer, got \"x\""},
		{"n: 10\nitems: x\n", "f.yaml:1:4: n: 10 is out of range [1, 9]\nf.yaml:2:8: items: want a list, got \"x\""},
		{"items: [a, {b: c}]\n", "f.yaml:1:12: item: want a value, got a mapping"},
		{"- a\n", "f.yaml:1:1: top: want a mapping, got a list"},
		{"name: a\n---\nname: b\n", "f.yaml:2:1: one document, please"},
		{"name: a\n---\nname: [\n", "f.yaml:3:1: invalid YAML: did not find expected node content"},
		{"name: \"a\\nb\\x1b[31m\"\nnam: 1\n", `f.yaml:2:1: top: unknown key "nam" (known: name, n, items)`},
	} {
		if got := decode(t, tc.src); got != tc.want {
			t.Errorf("%q:\ngot  %s\nwant %s", tc.src, got, tc.want)
		}
	}
}

// TestErrorOneLine: a value quoted in a message cannot start another line.
func TestErrorOneLine(t *testing.T) {
	e := &Error{File: "f.yaml", Pos: Pos{Line: 1, Col: 2}, Msg: "bad \"x\ny\""}
	if s := e.Error(); strings.Contains(s, "\n") {
		t.Errorf("got %q; want one line", s)
	}
}

// TestWhere: a position, a whole file, and a file built into the program.
func TestWhere(t *testing.T) {
	for _, tc := range []struct {
		file string
		pos  Pos
		want string
	}{
		{"f.yaml", Pos{Line: 3, Col: 7}, "f.yaml:3:7"},
		{"f.yaml", Pos{}, "f.yaml"},
		{"", Pos{}, "<built-in>"},
		{"", Pos{Line: 1, Col: 1}, "<built-in>:1:1"},
	} {
		if got := Where(tc.file, tc.pos); got != tc.want {
			t.Errorf("Where(%q, %v) = %q, want %q", tc.file, tc.pos, got, tc.want)
		}
	}
}
