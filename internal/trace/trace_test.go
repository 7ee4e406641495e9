package trace

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestOffRecordsNothing: without Open, spans record nothing and write no file.
func TestOffRecordsNothing(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvVar, "")
	OpenFromEnv("test") // unset: stays off
	if Enabled() {
		t.Fatal("tracing on without a file")
	}
	s := Begin("phase")
	if s != (Span{}) {
		t.Fatalf("Begin with tracing off = %+v; want the zero Span", s)
	}
	s.End()
	Add("other", time.Now(), time.Now())
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("files written with tracing off: %v", ents)
	}
}

// TestRecordsJSONLines: each span is one JSON line with this pid, the name and an
// end not before its start; the process's start comes first.
func TestRecordsJSONLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	t.Setenv(EnvVar, path)
	OpenFromEnv("test")
	t.Cleanup(func() { Close() })
	s := Begin("a.phase")
	s.End()
	now := time.Now()
	Add("b.phase", now, now.Add(time.Millisecond))
	if err := Close(); err != nil {
		t.Fatal(err)
	}
	Begin("after.close").End() // off again: not recorded

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if r.Pid != os.Getpid() || r.Prog != "test" || r.End < r.Start || r.Start == 0 {
			t.Errorf("record %+v: want pid %d, prog test, start <= end", r, os.Getpid())
		}
		names = append(names, r.Name)
	}
	want := []string{"process.start", "a.phase", "b.phase"}
	if len(names) != len(want) {
		t.Fatalf("names %q; want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("names %q; want %q", names, want)
		}
	}
}
