package audit

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// t0 is the time of the first run the housekeeping tests write.
var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// writeRunAt writes a run of workspace ws started at at under root: one command, sealed
// a minute later when seal is set, else left as a crashed run leaves it.
func writeRunAt(t *testing.T, root, suffix, ws string, at time.Time, seal bool) Run {
	t.Helper()
	id := at.UTC().Format("20060102T150405Z") + "-" + suffix
	now := at
	w, err := Create(root, id, Options{Start: RunStart{Backend: "bwrap", Workspace: ws}, now: func() time.Time {
		now = now.Add(time.Second)
		return now
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.StartCmd(CmdStart{Argv: []string{"true"}, Cwd: ws}); err != nil {
		t.Fatal(err)
	}
	if seal {
		now = at.Add(time.Minute)
		if err := w.Close(RunEnd{Reason: ReasonExited}); err != nil {
			t.Fatal(err)
		}
	} else if err := w.f.Close(); err != nil { // as a crash leaves it: no run.end
		t.Fatal(err)
	}
	return Run{ID: id, Dir: filepath.Join(root, id)}
}

func TestLatest(t *testing.T) {
	root := t.TempDir()
	writeRunAt(t, root, "00000a", "/ws/a", t0, true)
	b1 := writeRunAt(t, root, "00000b", "/ws/b", t0.Add(time.Hour), true)
	a2 := writeRunAt(t, root, "0000a2", "/ws/a", t0.Add(2*time.Hour), false)
	writeRunAt(t, root, "0000c1", "", t0.Add(3*time.Hour), true) // a log from before run.start had a workspace
	tests := []struct {
		name, ws string
		want     string
		err      error
	}{
		{"any workspace", "", "20261101T150000Z-0000c1", nil},
		{"newest of a, live or not", "/ws/a", a2.ID, nil},
		{"cleaned", "/ws/b/", b1.ID, nil},
		{"none", "/ws/c", "", ErrRunNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Latest(root, tt.ws)
			if !errors.Is(err, tt.err) || got.ID != tt.want {
				t.Errorf("Latest(%q) = %q, %v; want %q, %v", tt.ws, got.ID, err, tt.want, tt.err)
			}
			if err == nil && got.Dir != filepath.Join(root, tt.want) {
				t.Errorf("Dir = %q", got.Dir)
			}
		})
	}
	if _, err := Latest(t.TempDir(), ""); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("empty root: %v", err)
	}
}
