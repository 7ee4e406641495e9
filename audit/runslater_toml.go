package audit

import (
	"strconv"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// tomlManifest checks a TOML manifest by where its changed lines are: the table and
// key each belongs to, joined with "/" ("build-system/requires", "package/build").
type tomlManifest struct {
	name  string
	rules []tomlRule // the first rule matching a changed line decides for it
	// unknown is the flag of a changed line the check cannot place.
	unknown Flag
}

type tomlRule struct {
	globs []string // doublestar patterns over the line's table and key
	cat   Category
	what  string
}

var pyprojectTOML = tomlManifest{
	name: "pyproject.toml",
	rules: []tomlRule{
		{[]string{"build-system/**"}, PackageScripts, "[build-system], the build backend pip runs to build and install it"},
		{[]string{"project/scripts/**", "project/gui-scripts/**", "project/entry-points/**", "tool/poetry/scripts/**", "tool/poetry/plugins/**"},
			PackageScripts, "entry points, the commands and plugins installed with it"},
		{[]string{"tool/hatch/build/**", "tool/hatch/envs/**", "tool/setuptools/cmdclass/**", "tool/setuptools/script-files/**"},
			PackageScripts, "build hooks or environment scripts, run by hatch or setuptools"},
		{[]string{"tool/pdm/scripts/**", "tool/poe/**", "tool/taskipy/**"}, PackageScripts, "tasks, run by pdm, poe or taskipy"},
		{[]string{"project/dependencies/**", "project/optional-dependencies/**", "dependency-groups/**",
			"tool/poetry/dependencies/**", "tool/poetry/dev-dependencies/**", "tool/poetry/group/**", "tool/poetry/source/**",
			"tool/uv/**", "tool/pdm/dev-dependencies/**", "tool/pdm/source/**"}, Dependencies, "dependencies, installed by pip, poetry, uv or pdm"},
	},
	unknown: Flag{Category: PackageScripts, Reason: "pyproject.toml, changed where the log's diff cannot place (its [build-system] and entry points run on pip install)"},
}

var cargoTOML = tomlManifest{
	name: "Cargo.toml",
	rules: []tomlRule{
		{[]string{"package/build/**", "build-dependencies/**", "target/*/build-dependencies/**"},
			Build, "build script or [build-dependencies], compiled and run by cargo build"},
		{[]string{"dependencies/**", "dev-dependencies/**", "target/*/dependencies/**", "target/*/dev-dependencies/**",
			"workspace/dependencies/**", "patch/**", "replace/**"}, Dependencies, "dependencies, fetched and built by cargo"},
	},
	unknown: Flag{Category: Build, Reason: "Cargo.toml, changed where the log's diff cannot place (build = and [build-dependencies] run at cargo build)"},
}

func (m tomlManifest) check(t texts) (Flag, bool) {
	got, best := touchNone, (*tomlRule)(nil)
	for _, s := range []side{t.old, t.new} {
		if !s.known {
			got = max(got, touchUnknown)
			continue
		}
		p := s.prefix()
		wheres := tomlWheres(s.lines[:p])
		for _, l := range s.changedLines() {
			w := tomlWhere{unknown: true}
			if l.n <= p {
				w = wheres[l.n-1]
			}
			switch r := m.match(w); {
			case w.trivial:
			case w.unknown:
				got = max(got, touchUnknown)
			case r != nil && (r.cat == Dependencies) && got < touchDeps:
				got, best = touchDeps, r
			case r != nil && r.cat != Dependencies && got < touchRuns:
				got, best = touchRuns, r
			}
		}
	}
	switch got {
	case touchRuns, touchDeps:
		return Flag{Category: best.cat, Reason: m.name + " " + best.what}, true
	case touchUnknown:
		return m.unknown, true
	}
	return Flag{}, false
}

func (m tomlManifest) match(w tomlWhere) *tomlRule {
	if w.unknown || w.trivial {
		return nil
	}
	name := strings.Join(w.path, "/")
	for i := range m.rules {
		for _, g := range m.rules[i].globs {
			if ok, _ := doublestar.Match(g, name); ok {
				return &m.rules[i]
			}
		}
	}
	return nil
}

// tomlWhere is where one line of a TOML file is.
type tomlWhere struct {
	path    []string // the table's and the key's names
	trivial bool     // a blank or comment line
	unknown bool     // the reader lost its place (malformed, or a name it cannot read)
}

// tomlReader follows a TOML file line by line from line 1: the current table, the key
// whose value is being read, and whether that value (an array, an inline table, a
// multi-line string) goes on.
type tomlReader struct {
	table, key []string
	depth      int    // open brackets and braces of the value
	multi      string // `"""` or `'''` while in a multi-line string
	lost       bool   // malformed: every later line is unknown
}

// tomlWheres returns where each of lines (the start of a TOML file, from line 1) is.
func tomlWheres(lines []textLine) []tomlWhere {
	out := make([]tomlWhere, len(lines))
	var r tomlReader
	for i, l := range lines {
		out[i] = r.line(l.text)
	}
	return out
}

func (r *tomlReader) line(text string) tomlWhere {
	if r.lost {
		return tomlWhere{unknown: true}
	}
	here := func() tomlWhere { return tomlWhere{path: append(append([]string(nil), r.table...), r.key...)} }
	if r.multi != "" {
		w := here()
		if rest, ok := closeString(text, r.multi); ok {
			r.multi = ""
			r.value(rest)
		}
		return w
	}
	trim := strings.TrimLeft(text, " \t")
	switch {
	case trim == "" || trim[0] == '#':
		return tomlWhere{trivial: true}
	case r.depth > 0:
		w := here()
		r.value(trim)
		return w
	case trim[0] == '[':
		name, ok := tomlHeader(trim)
		if !ok {
			r.lost = true
			return tomlWhere{unknown: true}
		}
		r.table, r.key = name, nil
		return here()
	}
	key, rest, ok := tomlDottedKey(trim)
	rest = strings.TrimLeft(rest, " \t")
	if !ok || !strings.HasPrefix(rest, "=") {
		r.lost = true
		return tomlWhere{unknown: true}
	}
	r.key = key
	w := here()
	r.value(rest[1:])
	return w
}

// value reads the rest of a line holding (part of) a value: strings, brackets,
// comments.
func (r *tomlReader) value(s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '#':
			return
		case '[', '{':
			r.depth++
		case ']', '}':
			if r.depth--; r.depth < 0 {
				r.lost = true
				return
			}
		case '"', '\'':
			delim := s[i : i+1]
			if strings.HasPrefix(s[i:], strings.Repeat(delim, 3)) {
				delim = strings.Repeat(delim, 3)
			}
			rest, ok := closeString(s[i+len(delim):], delim)
			if !ok && len(delim) == 1 {
				r.lost = true // a one-line string that does not end on its line
				return
			}
			if !ok {
				r.multi = delim
				return
			}
			s, i = rest, -1
		}
	}
}

// closeString returns what follows the delimiter that ends a string starting at s.
// Basic strings (") have backslash escapes; literal strings (') do not. A multi-line
// string may end with one or two more quotes, which belong to it.
func closeString(s, delim string) (string, bool) {
	for i := 0; i < len(s); i++ {
		if delim[0] == '"' && s[i] == '\\' {
			i++
			continue
		}
		if strings.HasPrefix(s[i:], delim) {
			end := i + len(delim)
			for n := 0; len(delim) == 3 && n < 2 && end < len(s) && s[end] == delim[0]; n++ {
				end++
			}
			return s[end:], true
		}
	}
	return "", false
}

// tomlHeader reads a table header, "[a.b]" or "[[a.b]]", with an optional comment.
func tomlHeader(s string) ([]string, bool) {
	open := "["
	if strings.HasPrefix(s, "[[") {
		open = "[["
	}
	name, rest, ok := tomlDottedKey(s[len(open):])
	rest = strings.TrimLeft(rest, " \t")
	closing := strings.Repeat("]", len(open))
	if !ok || !strings.HasPrefix(rest, closing) {
		return nil, false
	}
	rest = strings.TrimLeft(rest[len(closing):], " \t")
	return name, rest == "" || rest[0] == '#'
}

// tomlDottedKey reads a dotted key (bare, "basic" or 'literal' parts) and returns its
// parts and what follows it. A part that cannot be read is an error.
func tomlDottedKey(s string) (parts []string, rest string, ok bool) {
	for {
		s = strings.TrimLeft(s, " \t")
		var part string
		switch {
		case s == "":
			return nil, "", false
		case s[0] == '"' || s[0] == '\'':
			after, found := closeString(s[1:], s[:1])
			if !found {
				return nil, "", false
			}
			tok := s[:len(s)-len(after)]
			if tok[0] == '\'' {
				part = tok[1 : len(tok)-1]
			} else if part, ok = unquoteBasic(tok); !ok {
				return nil, "", false
			}
			s = after
		default:
			n := strings.IndexFunc(s, func(r rune) bool { return !isBareKeyRune(r) })
			if n < 0 {
				n = len(s)
			}
			if n == 0 {
				return nil, "", false
			}
			part, s = s[:n], s[n:]
		}
		parts = append(parts, strings.ReplaceAll(part, "/", "%2F"))
		s = strings.TrimLeft(s, " \t")
		if !strings.HasPrefix(s, ".") {
			return parts, s, true
		}
		s = s[1:]
	}
}

func isBareKeyRune(r rune) bool {
	return r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// unquoteBasic decodes a TOML basic string token (TOML's escapes are Go's, but for a
// few Go has and TOML lacks, which a valid file does not hold).
func unquoteBasic(tok string) (string, bool) {
	s, err := strconv.Unquote(tok)
	return s, err == nil
}
