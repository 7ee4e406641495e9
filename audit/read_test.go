package audit

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

func TestRunID(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 20, 15, 30, 0, time.FixedZone("CET", 3600))
	id := NewRunID(t0)
	if !strings.HasPrefix(id, "20261129T191530Z-") || ValidateRunID(id) != nil {
		t.Errorf("NewRunID = %q", id)
	}
	if later := NewRunID(t0.Add(time.Second)); later <= id {
		t.Errorf("ids do not sort by time: %q <= %q", later, id)
	}
	for _, bad := range []string{"", "..", "../20261129T191530Z-3fa9c1", "20261129T191530Z-3fa9c1/..",
		"20261129T191530Z-3FA9C1", "20261129T191530Z", "x20261129T191530Z-3fa9c1", "20261129T191530Z-3fa9c1\n"} {
		if err := ValidateRunID(bad); !errors.Is(err, ErrInvalidRunID) {
			t.Errorf("ValidateRunID(%q) = %v; want ErrInvalidRunID", bad, err)
		}
	}
}

func TestDefaultRoot(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	tests := []struct{ xdg, want string }{
		{"/state", "/state/cordon/runs"},
		{"", filepath.Join(home, ".local/state/cordon/runs")},
		{"relative/ignored", filepath.Join(home, ".local/state/cordon/runs")},
	}
	for _, tt := range tests {
		t.Setenv("XDG_STATE_HOME", tt.xdg)
		if got, err := DefaultRoot(); err != nil || got != tt.want {
			t.Errorf("XDG_STATE_HOME=%q: DefaultRoot() = %q, %v; want %q", tt.xdg, got, err, tt.want)
		}
	}
}

func TestOpenAndReadEvents(t *testing.T) {
	path := writeSampleRun(t)
	root := filepath.Dir(filepath.Dir(path))
	r, err := Open(root, testRun)
	if err != nil || r.EventsPath() != path {
		t.Fatalf("Open = %+v, %v", r, err)
	}
	recs, err := ReadEvents(r.EventsPath())
	if err != nil {
		t.Fatal(err)
	}
	var types []event.Type
	for _, rec := range recs {
		types = append(types, rec.Type)
	}
	want := []event.Type{event.RunStart, event.CmdStart, event.NetAllow, event.NetDeny, event.CmdEnd, event.RunEnd}
	if !slices.Equal(types, want) {
		t.Errorf("types %v; want %v", types, want)
	}
	var end CmdEnd
	if err := recs[4].DecodeBody(&end); err != nil || end.ExitCode != 2 || recs[4].Cmd != "2" {
		t.Errorf("cmd.end: %+v, %v", end, err)
	}
	if _, err := Open(root, "../"+testRun); !errors.Is(err, ErrInvalidRunID) {
		t.Errorf("Open(traversal) = %v", err)
	}
	if _, err := Open(root, "20000101T000000Z-000000"); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("Open(missing) = %v", err)
	}
	// A partial last line: the whole records are returned, with ErrTruncated.
	data, _ := os.ReadFile(path)
	if err := os.WriteFile(path, data[:len(data)-10], 0o600); err != nil {
		t.Fatal(err)
	}
	recs, err = ReadEvents(path)
	if len(recs) != 5 || !errors.Is(err, ErrTruncated) {
		t.Errorf("ReadEvents(truncated) = %d records, %v", len(recs), err)
	}
}

func TestList(t *testing.T) {
	root := t.TempDir()
	mk := func(id string, cmds int, seal bool) {
		t.Helper()
		w, err := Create(root, id, Options{Start: testStart(), Sync: SyncClose})
		if err != nil {
			t.Fatal(err)
		}
		for range cmds {
			if _, err := w.StartCmd(CmdStart{Argv: []string{"true"}}); err != nil {
				t.Fatal(err)
			}
		}
		if seal {
			if err := w.Close(RunEnd{ExitCode: 124, Reason: ReasonTimeout}); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("20261129T100000Z-aaaaaa", 2, true)
	mk("20261130T100000Z-bbbbbb", 1, false)
	mk("20261128T100000Z-cccccc", 0, true)
	for _, junk := range []string{"not-a-run", "20261129T100000Z-dddddd"} { // the second has no log
		if err := os.Mkdir(filepath.Join(root, junk), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	got, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		id     string
		cmds   int
		status string
	}
	var rows []row
	for _, s := range got {
		rows = append(rows, row{s.ID, s.Commands, s.Status()})
		if s.Err == nil && (s.Backend != "bwrap" || s.ContractPath != "/w/cordon.yaml" || s.Start.IsZero()) {
			t.Errorf("%s: summary %+v", s.ID, s)
		}
	}
	want := []row{
		{"20261130T100000Z-bbbbbb", 1, "unsealed"},
		{"20261129T100000Z-aaaaaa", 2, "exit 124 (timeout)"}, // same second: by start time
		{"20261129T100000Z-dddddd", 0, "unreadable"},
		{"20261128T100000Z-cccccc", 0, "exit 124 (timeout)"},
	}
	if !slices.Equal(rows, want) {
		t.Errorf("List:\n got %+v\nwant %+v", rows, want)
	}
	if runs, err := List(filepath.Join(root, "missing")); err != nil || len(runs) != 0 {
		t.Errorf("List(missing root) = %v, %v", runs, err)
	}
}
