package audit

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// The content checks of the runs-later table. Each looks at the changed lines of both
// sides. When the whole file is known (an added or deleted file, a small file the
// patch shows entirely, or a caller's Old and New) the check is exact. Otherwise it
// places each changed line by reading the file from line 1, which works as long as the
// patch shows every line above it (a change near the top); a changed line it cannot
// place flags the manifest anyway, since it may be a script.

// touch is what the changed lines of a manifest touched, most severe first.
type touch int

const (
	touchNone    touch = iota
	touchDeps          // dependencies
	touchUnknown       // a line the check could not place
	touchRuns          // what runs: scripts, build settings
)

// checkGoGenerate flags a Go file to which a //go:generate line was added (go
// generate runs the rest of the line). A Go file whose content is not known is not
// flagged: Go files are everywhere, and most changes to them run nothing later.
func checkGoGenerate(t texts) (Flag, bool) {
	for _, l := range t.new.changedLines() {
		if strings.HasPrefix(strings.TrimLeft(l.text, " \t"), "//go:generate") {
			return Flag{Category: Build, Reason: "//go:generate line added, run by go generate"}, true
		}
	}
	return Flag{}, false
}

// jsonManifest checks a JSON package manifest by its top-level members.
type jsonManifest struct {
	name    string   // "package.json"
	runs    string   // who runs its scripts, and when
	tool    string   // the package manager that installs its dependencies
	scripts []string // members that hold commands
	deps    []string // members that name dependencies or where they come from
}

var (
	packageJSON = jsonManifest{name: "package.json", runs: "run by npm on install, test and build", tool: "npm",
		scripts: []string{"scripts", "gypfile"},
		deps: []string{"dependencies", "devDependencies", "optionalDependencies", "peerDependencies",
			"bundleDependencies", "bundledDependencies", "overrides", "resolutions", "workspaces", "packageManager"}}
	composerJSON = jsonManifest{name: "composer.json", runs: "run by composer on install and update", tool: "composer",
		scripts: []string{"scripts"},
		deps:    []string{"require", "require-dev", "repositories", "config", "extra"}}
)

func (m jsonManifest) check(t texts) (Flag, bool) {
	var got touch
	if t.old.whole && t.new.whole {
		got = m.compare(t.old.bytes(), t.new.bytes())
	} else {
		got = max(m.place(t.old), m.place(t.new))
	}
	switch got {
	case touchRuns:
		return Flag{Category: PackageScripts, Reason: m.name + " scripts, " + m.runs}, true
	case touchUnknown:
		return Flag{Category: PackageScripts, Reason: m.name + ", changed where the log's diff cannot place (its scripts are " + m.runs + ")"}, true
	case touchDeps:
		return Flag{Category: Dependencies, Reason: m.name + " dependencies, installed by " + m.tool}, true
	}
	return Flag{}, false
}

// kind says what changing top-level member k touches.
func (m jsonManifest) kind(k string) touch {
	switch {
	case k == unplaced:
		return touchUnknown
	case slices.Contains(m.scripts, k):
		return touchRuns
	case slices.Contains(m.deps, k):
		return touchDeps
	}
	return touchNone
}

// compare decodes both whole versions and compares the members that matter; a
// version that is not a JSON object touches everything.
func (m jsonManifest) compare(old, new []byte) touch {
	a, aok := jsonMembers(old)
	b, bok := jsonMembers(new)
	if !aok || !bok {
		return touchUnknown
	}
	got := touchNone
	for _, k := range slices.Concat(m.scripts, m.deps) {
		if !reflect.DeepEqual(a[k], b[k]) {
			got = max(got, m.kind(k))
		}
	}
	return got
}

// jsonMembers decodes a JSON object's members; empty content has none.
func jsonMembers(b []byte) (map[string]any, bool) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, true
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}

// place reads the known start of one side and returns what its changed lines touch.
func (m jsonManifest) place(s side) touch {
	if !s.known {
		return touchUnknown
	}
	p := s.prefix()
	tops := jsonTops(s.lines[:p])
	got := touchNone
	for _, l := range s.changedLines() {
		switch {
		case strings.TrimSpace(l.text) == "":
		case l.n > p:
			got = max(got, touchUnknown)
		default:
			for _, k := range tops[l.n-1] {
				got = max(got, m.kind(k))
			}
		}
	}
	return got
}

// unplaced stands for a member whose name could not be read.
const unplaced = "\x00unplaced"

// jsonTops returns, for each of lines (the start of a JSON object, from line 1), the
// top-level members that bytes of the line belong to: the key, its value, or the
// comma after it. The root's own braces belong to none.
func jsonTops(lines []textLine) [][]string {
	out := make([][]string, len(lines))
	add := func(i int, k string) {
		if k != "" && !slices.Contains(out[i], k) {
			out[i] = append(out[i], k)
		}
	}
	var (
		depth        int
		top          string // the member being read
		inStr, esc   bool
		str          strings.Builder // the string being read, with its quotes
		key, keyLine = "", 0         // the last string at depth 1, the key if ':' follows
		strLine      int
	)
	for i, l := range lines {
		for j := 0; j < len(l.text); j++ {
			c := l.text[j]
			if inStr {
				str.WriteByte(c)
				switch {
				case esc:
					esc = false
				case c == '\\':
					esc = true
				case c == '"':
					inStr = false
					if depth == 1 {
						key, keyLine = jsonKey(str.String()), strLine
					}
				}
				add(i, top)
				continue
			}
			switch c {
			case ' ', '\t', '\r', '\n':
				continue
			case '"':
				inStr, strLine = true, i
				str.Reset()
				str.WriteByte(c)
			case ':':
				if depth == 1 {
					top = key
					add(keyLine, top)
				}
			case '{', '[':
				depth++
				if depth == 1 {
					continue // the root opens
				}
			case '}', ']':
				depth--
				if depth <= 0 {
					continue // the root closes
				}
			}
			add(i, top)
			if c == ',' && depth == 1 {
				top = ""
			}
		}
	}
	return out
}

// jsonKey decodes a JSON string token; one that does not decode is unplaced.
func jsonKey(tok string) string {
	var s string
	if err := json.Unmarshal([]byte(tok), &s); err != nil {
		return unplaced
	}
	return s
}
