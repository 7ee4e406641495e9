package event

import (
	"bufio"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docFile is the reference for the bodies of this package.
const docFile = "../../docs/audit.md"

// docTable is one body's table in docFile: the paragraph that introduces it and the
// JSON field names its rows list.
type docTable struct {
	intro  string
	fields []string
}

var (
	goName = regexp.MustCompile("`event\\.(\\w+)`") // a body's Go name in its introduction
	quoted = regexp.MustCompile("`([^`]+)`")        // a field name in a row's first cell
)

// readDocTables returns the tables of docFile that a paragraph naming an event struct
// ("(`event.NetBody`)") introduces, by struct name. A table is a run of lines starting
// with "|"; the first cell of each row after the header lists one or more field names,
// each in backquotes.
func readDocTables(t *testing.T) map[string]docTable {
	t.Helper()
	f, err := os.Open(docFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tables := map[string]docTable{}
	var para []string // the last paragraph before the current line, line by line
	var owner string  // the struct whose table is being read, "" for none
	var last string   // the previous line
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "|") && !strings.HasPrefix(last, "|"): // a table starts
			owner = ""
			if m := goName.FindStringSubmatch(strings.Join(para, " ")); m != nil {
				owner = m[1]
				if _, dup := tables[owner]; dup {
					t.Errorf("%s: event.%s has two tables", docFile, owner)
				}
				tables[owner] = docTable{intro: strings.Join(para, " ")}
			}
		case strings.HasPrefix(line, "|"): // a row: the header is the first, then the separator
			if owner != "" && !strings.HasPrefix(line, "|--") {
				cell, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
				tab := tables[owner]
				for _, m := range quoted.FindAllStringSubmatch(cell, -1) {
					tab.fields = append(tab.fields, m[1])
				}
				tables[owner] = tab
			}
		case strings.TrimSpace(line) != "":
			if strings.TrimSpace(last) == "" || strings.HasPrefix(last, "|") {
				para = nil // a new paragraph
			}
			para = append(para, line)
		}
		last = line
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return tables
}

// jsonFields returns the JSON names of a struct's fields, in order.
func jsonFields(st reflect.Type) []string {
	var names []string
	for i := range st.NumField() {
		name, _, _ := strings.Cut(st.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// schemaStructs returns every struct of this package reachable from a body type: the
// bodies and the objects nested in them.
func schemaStructs() map[string]reflect.Type {
	out := map[string]reflect.Type{}
	pkg := reflect.TypeFor[Event]().PkgPath()
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || ty.PkgPath() != pkg || out[ty.Name()] != nil {
			return
		}
		out[ty.Name()] = ty
		for i := range ty.NumField() {
			walk(ty.Field(i).Type)
		}
	}
	for _, b := range bodies {
		walk(reflect.TypeOf(b))
	}
	return out
}

// TestDocDescribesTheSchema: docs/audit.md has one table per body struct (and per
// object nested in one), listing exactly its JSON fields, and introduces each body with
// the event types that carry it.
func TestDocDescribesTheSchema(t *testing.T) {
	tables := readDocTables(t)
	structs := schemaStructs()
	for name, st := range structs {
		tab, ok := tables[name]
		if !ok {
			t.Errorf("%s documents no table for event.%s", docFile, name)
			continue
		}
		want := jsonFields(st)
		for _, f := range want {
			if !slices.Contains(tab.fields, f) {
				t.Errorf("event.%s: field %q is not documented in %s", name, f, docFile)
			}
		}
		for _, f := range tab.fields {
			if !slices.Contains(want, f) {
				t.Errorf("%s documents field %q of event.%s, which has no such field", docFile, f, name)
			}
		}
		if dups := len(tab.fields) - len(slices.Compact(slices.Sorted(slices.Values(tab.fields)))); dups > 0 {
			t.Errorf("%s lists a field of event.%s twice: %q", docFile, name, tab.fields)
		}
	}
	for name := range tables {
		if structs[name] == nil {
			t.Errorf("%s has a table for event.%s, which is no body", docFile, name)
		}
	}
	for typ, b := range bodies {
		name := reflect.TypeOf(b).Name()
		if tab, ok := tables[name]; ok && !strings.Contains(tab.intro, "`"+string(typ)+"`") {
			t.Errorf("%s: the table of event.%s does not say it is the body of %s", docFile, name, typ)
		}
	}
}
