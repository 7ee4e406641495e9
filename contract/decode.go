package contract

import (
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/cordonhq/cordon/internal/strictyaml"
)

// Load reads and strictly decodes the contract file at path. Every problem found is
// returned, joined, each as an [*Error] carrying FILE:LINE:COL. Load does not validate
// semantics beyond types; call [Validate] (or [Compile], which does) for that.
func Load(path string) (*Contract, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading contract: %w", err)
	}
	defer f.Close()
	return load(path, f)
}

// LoadRegular is [Load] for a contract file no one named (the workspace's cordon.yaml,
// which the workspace's writers may replace): only a regular file is read, opened
// without waiting, so that a fifo or a device there is refused rather than hang the
// caller. A link to a regular file is followed.
func LoadRegular(path string) (*Contract, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("reading contract: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("reading contract: %w", err)
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("reading contract: %s is not a regular file (%s)", path, kindOf(st.Mode()))
	}
	return load(path, f)
}

// kindOf names the kind of file m is, for an error.
func kindOf(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a fifo"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	}
	return "mode " + m.String()
}

// MaxSize bounds a contract file: a contract is a page or two of YAML.
const MaxSize = 1 << 20

// load reads a contract of at most MaxSize bytes from f, the file path.
func load(path string, f io.Reader) (*Contract, error) {
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading contract: %w", err)
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("reading contract: %s is larger than %d bytes: no contract is", path, MaxSize)
	}
	return Parse(path, data)
}

// Parse decodes a contract from data; file names it in errors.
func Parse(file string, data []byte) (*Contract, error) {
	top, sd, err := strictyaml.Parse(file, data, strictyaml.Doc{
		Empty:  "empty contract: want at least \"version: 1\"",
		Second: "a contract is one YAML document; found a second one",
	})
	if err != nil {
		return nil, err
	}
	d := &decoder{sd}
	c := &Contract{File: file, Source: data}
	d.contract(top, c)
	if err := d.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// decoder walks a yaml.Node tree against the contract schema, collecting every problem
// through [strictyaml.Decoder]; it adds the value types only a contract has.
type decoder struct{ *strictyaml.Decoder }

func (d *decoder) strPos(n *yaml.Node, what string) Str {
	return Str{Value: d.Str(n, what), Pos: strictyaml.PosOf(n)}
}

// strList decodes a list of strings; an explicit empty list gives a non-nil empty slice.
func (d *decoder) strList(n *yaml.Node, what string) []Str {
	out := []Str{}
	d.List(n, what, func(item *yaml.Node) {
		out = append(out, d.strPos(item, what+" entry"))
	})
	return out
}

func (d *decoder) duration(n *yaml.Node, what string) time.Duration {
	s, ok := d.Scalar(n, what)
	if !ok {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.At(n, "%s: invalid duration %q (want e.g. 90s, 5m, 1h30m)", what, s)
		return 0
	}
	if v <= 0 {
		d.At(n, "%s: duration must be positive, got %s", what, s)
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
	s, ok := d.Scalar(n, what)
	if !ok {
		return 0
	}
	v, err := ParseSize(s)
	if err != nil {
		d.At(n, "%s: %v", what, err)
		return 0
	}
	return v
}
