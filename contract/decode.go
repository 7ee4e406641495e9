package contract

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// Load reads and strictly decodes the contract file at path. Every problem found is
// returned, joined, each as an [*Error] carrying FILE:LINE:COL. Load does not validate
// semantics beyond types; call [Validate] (or [Compile], which does) for that.
func Load(path string) (*Contract, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading contract: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes a contract from data; file names it in errors.
func Parse(file string, data []byte) (*Contract, error) {
	d := &decoder{file: file}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: file, Msg: "empty contract: want at least \"version: 1\""}
		}
		return nil, d.syntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, d.at(&extra, "a contract is one YAML document; found a second one")
	}
	c := &Contract{File: file, Source: data}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	d.contract(doc, c)
	if len(d.errs) > 0 {
		return nil, errors.Join(d.errs...)
	}
	return c, nil
}

var yamlLine = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

func (d *decoder) syntaxError(err error) error {
	if m := yamlLine().FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: d.file, Pos: Pos{Line: line, Col: 1}, Msg: "invalid YAML: " + m[2]}
	}
	return &Error{File: d.file, Msg: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
}

// decoder walks a yaml.Node tree against the schema, collecting every problem.
type decoder struct {
	file string
	errs []error
}

func pos(n *yaml.Node) Pos { return Pos{Line: n.Line, Col: n.Column} }

func (d *decoder) at(n *yaml.Node, format string, args ...any) error {
	err := &Error{File: d.file, Pos: pos(n), Msg: fmt.Sprintf(format, args...)}
	d.errs = append(d.errs, err)
	return err
}

// kindName describes a node for "want X, got Y" messages.
func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}

// field is one key of a mapping in the schema.
type field struct {
	name string
	fn   func(*yaml.Node)
}

// mapping decodes n as a mapping with exactly the given keys: unknown and duplicate
// keys are errors. A null node is an empty mapping.
func (d *decoder) mapping(n *yaml.Node, what string, fields ...field) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		d.at(n, "%s: want a mapping, got %s", what, kindName(n))
		return
	}
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if prev, dup := seen[k.Value]; dup {
			d.at(k, "%s: duplicate key %q (first at line %d)", what, k.Value, prev.Line)
			continue
		}
		seen[k.Value] = k
		fn := lookupField(fields, k.Value)
		if fn == nil {
			d.at(k, "%s: unknown key %q (known: %s)", what, k.Value, fieldNames(fields))
			continue
		}
		fn(v)
	}
}

func lookupField(fields []field, name string) func(*yaml.Node) {
	for _, f := range fields {
		if f.name == name {
			return f.fn
		}
	}
	return nil
}

func fieldNames(fields []field) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

func (d *decoder) scalar(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || isNull(n) {
		d.at(n, "%s: want a value, got %s", what, kindName(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) str(n *yaml.Node, what string) string {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!str" && n.Tag != "!!null" {
		d.at(n, "%s: want a string, got %s (quote it)", what, kindName(n))
		return ""
	}
	s, _ := d.scalar(n, what)
	return s
}

func (d *decoder) strPos(n *yaml.Node, what string) Str {
	return Str{Value: d.str(n, what), Pos: pos(n)}
}

func (d *decoder) list(n *yaml.Node, what string, fn func(*yaml.Node)) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.at(n, "%s: want a list, got %s", what, kindName(n))
		return
	}
	for _, item := range n.Content {
		fn(item)
	}
}

// strList decodes a list of strings; an explicit empty list gives a non-nil empty slice.
func (d *decoder) strList(n *yaml.Node, what string) []Str {
	out := []Str{}
	d.list(n, what, func(item *yaml.Node) {
		out = append(out, d.strPos(item, what+" entry"))
	})
	return out
}

func (d *decoder) integer(n *yaml.Node, what string, min, max int64) int64 {
	s, ok := d.scalar(n, what)
	if !ok {
		return 0
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n.Tag != "!!int" {
		d.at(n, "%s: want an integer, got %s", what, kindName(n))
		return 0
	}
	if v < min || v > max {
		d.at(n, "%s: %d is out of range [%d, %d]", what, v, min, max)
		return 0
	}
	return v
}

func (d *decoder) duration(n *yaml.Node, what string) time.Duration {
	s, ok := d.scalar(n, what)
	if !ok {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.at(n, "%s: invalid duration %q (want e.g. 90s, 5m, 1h30m)", what, s)
		return 0
	}
	if v <= 0 {
		d.at(n, "%s: duration must be positive, got %s", what, s)
		return 0
	}
	return v
}

var sizeRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B?|B)?$`) })

var sizeUnits = map[string]float64{
	"": 1, "B": 1,
	"K": 1e3, "KB": 1e3, "Ki": 1 << 10, "KiB": 1 << 10,
	"M": 1e6, "MB": 1e6, "Mi": 1 << 20, "MiB": 1 << 20,
	"G": 1e9, "GB": 1e9, "Gi": 1 << 30, "GiB": 1 << 30,
	"T": 1e12, "TB": 1e12, "Ti": 1 << 40, "TiB": 1 << 40,
}

// ParseSize parses a byte size such as "512MiB", "2GiB", "1.5G" or "1048576".
func ParseSize(s string) (int64, error) {
	m := sizeRE().FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("invalid size %q (want e.g. 512MiB, 2GiB)", s)
	}
	unit, ok := sizeUnits[m[2]]
	if !ok {
		return 0, fmt.Errorf("invalid size unit in %q", s)
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: %w", s, err)
	}
	v := f * unit
	if v < 1 || v > math.MaxInt64/2 {
		return 0, fmt.Errorf("size %q is out of range", s)
	}
	return int64(v), nil
}

func (d *decoder) size(n *yaml.Node, what string) int64 {
	s, ok := d.scalar(n, what)
	if !ok {
		return 0
	}
	v, err := ParseSize(s)
	if err != nil {
		d.at(n, "%s: %v", what, err)
		return 0
	}
	return v
}
