// Package strictyaml decodes YAML configuration strictly and reports every problem at
// once, each as FILE:LINE:COL: message. It walks yaml.v3 nodes against a schema the
// caller writes as code ([Decoder.Mapping] with one [Field] per key): unknown keys,
// duplicate keys, a second document, aliases where a value is wanted and values of the
// wrong type are errors, never silently ignored.
//
// It holds the machinery only, no schema: contract and server/config each write theirs
// over it, and their Pos and Error are this package's.
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/termtext"
)

// Pos is a position in a YAML file, 1-based; the zero Pos means "the whole file".
type Pos struct {
	Line int `json:"line,omitempty"`
	Col  int `json:"col,omitempty"`
}

// PosOf is where n was written.
func PosOf(n *yaml.Node) Pos { return Pos{Line: n.Line, Col: n.Column} }

// Error is one problem in a file, at a position.
type Error struct {
	File string
	Pos  Pos
	Msg  string
}

// Error is FILE:LINE:COL: message on one line (a value quoted in Msg cannot start
// another line nor drive a terminal).
func (e *Error) Error() string {
	return termtext.Line(Where(e.File, e.Pos) + ": " + e.Msg)
}

// Where formats FILE:LINE:COL, or FILE alone for the zero Pos. A file with no name is
// one built into the program: <built-in>.
func Where(file string, p Pos) string {
	if file == "" {
		file = "<built-in>"
	}
	if p.Line == 0 {
		return file
	}
	return file + ":" + strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Col)
}

// Decoder collects the problems of one file. The zero value is not usable: make one
// with [Parse]. It is not safe for concurrent use.
type Decoder struct {
	file string
	errs []error
}

// Doc is what the caller's file is, in the words of the two problems found before its
// schema applies: each is an [Error]'s whole Msg.
type Doc struct {
	Empty  string // the file holds no document: say what it must at least hold
	Second string // the file holds a second document (at its position)
}

// Parse reads data as exactly one YAML document and returns its top node (the
// document's content) and a Decoder for it. An empty file, a second document or a
// syntax error anywhere (a second document's too) is returned as an [*Error].
func Parse(file string, data []byte, doc Doc) (*yaml.Node, *Decoder, error) {
	d := &Decoder{file: file}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil, &Error{File: file, Msg: doc.Empty}
		}
		return nil, nil, d.syntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, nil, &Error{File: file, Pos: PosOf(&extra), Msg: doc.Second}
	} else if !errors.Is(err, io.EOF) {
		return nil, nil, d.syntaxError(err)
	}
	top := &root
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	return top, d, nil
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

func (d *Decoder) syntaxError(err error) error {
	if m := yamlLine().FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: d.file, Pos: Pos{Line: line, Col: 1}, Msg: "invalid YAML: " + m[2]}
	}
	return &Error{File: d.file, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}

// File is the file name errors carry.
func (d *Decoder) File() string { return d.file }

// At records a problem at n.
func (d *Decoder) At(n *yaml.Node, format string, args ...any) {
	d.AtPos(PosOf(n), format, args...)
}

// AtPos records a problem at p.
func (d *Decoder) AtPos(p Pos, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Pos: p, Msg: fmt.Sprintf(format, args...)})
}

// Err is every problem recorded, joined, in the order found; nil when there is none.
func (d *Decoder) Err() error { return errors.Join(d.errs...) }

// Field is one key of a mapping in the schema and what decodes its value.
type Field struct {
	Name   string
	Decode func(*yaml.Node)
}

// Mapping decodes n as a mapping holding only the given keys: an unknown or repeated
// key is an error. A null node is an empty mapping.
func (d *Decoder) Mapping(n *yaml.Node, what string, fields ...Field) {
	if IsNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.At(n, "%s: want a mapping, got %s", what, KindName(n))
		return
	}
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if prev, dup := seen[k.Value]; dup {
			d.At(k, "%s: duplicate key %q (first at line %d)", what, k.Value, prev.Line)
			continue
		}
		seen[k.Value] = k
		f := lookup(fields, k.Value)
		if f == nil {
			d.At(k, "%s: unknown key %q (known: %s)", what, k.Value, names(fields))
			continue
		}
		f(v)
	}
}

func lookup(fields []Field, name string) func(*yaml.Node) {
	for _, f := range fields {
		if f.Name == name {
			return f.Decode
		}
	}
	return nil
}

func names(fields []Field) string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.Name
	}
	return strings.Join(out, ", ")
}

// IsNull reports whether n is an explicit or implicit null.
func IsNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// KindName describes n for "want X, got Y" messages.
func KindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if IsNull(n) {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

// Scalar is n's text when n is a non-null scalar.
func (d *Decoder) Scalar(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || IsNull(n) {
		d.At(n, "%s: want a value, got %s", what, KindName(n))
		return "", false
	}
	return n.Value, true
}

// Str is n as a string: a number or a boolean must be quoted to be one.
func (d *Decoder) Str(n *yaml.Node, what string) string {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!str" && !IsNull(n) {
		d.At(n, "%s: want a string, got %s (quote it)", what, KindName(n))
		return ""
	}
	s, _ := d.Scalar(n, what)
	return s
}

// List calls fn for each item of the list n; a null node is an empty list.
func (d *Decoder) List(n *yaml.Node, what string, fn func(*yaml.Node)) {
	if IsNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.At(n, "%s: want a list, got %s", what, KindName(n))
		return
	}
	for _, item := range n.Content {
		fn(item)
	}
}

// Int is n as an integer in [lo, hi].
func (d *Decoder) Int(n *yaml.Node, what string, lo, hi int64) (int64, bool) {
	s, ok := d.Scalar(n, what)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n.Tag != "!!int" {
		d.At(n, "%s: want an integer, got %s", what, KindName(n))
		return 0, false
	}
	if v < lo || v > hi {
		d.At(n, "%s: %d is out of range [%d, %d]", what, v, lo, hi)
		return 0, false
	}
	return v, true
}

// Bool is n as a boolean: true or false, unquoted (YAML 1.1's yes, no, on and off
// are refused: a reader could take them for strings).
func (d *Decoder) Bool(n *yaml.Node, what string) bool {
	s, ok := d.Scalar(n, what)
	if !ok {
		return false
	}
	if n.Tag != "!!bool" || (s != "true" && s != "false") {
		d.At(n, "%s: want true or false, got %s", what, KindName(n))
		return false
	}
	return s == "true"
}
