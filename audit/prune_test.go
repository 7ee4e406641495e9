package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// pruneRoot writes a root of two workspaces: a has sealed runs at t0, +1h and +2h, an
// unsealed (crashed) one at -1h, a tampered sealed one at -2h and a live one at +3h;
// b has one sealed run at t0. Beside them lie a file and a directory that are not runs.
func pruneRoot(t *testing.T) (root string, ids map[string]string) {
	t.Helper()
	root = t.TempDir()
	ids = map[string]string{}
	for _, r := range []struct {
		name, suffix, ws string
		at               time.Duration
		seal             bool
	}{
		{"a0", "0000a0", "/ws/a", 0, true},
		{"a1", "0000a1", "/ws/a", time.Hour, true},
		{"a2", "0000a2", "/ws/a", 2 * time.Hour, true},
		{"crashed", "0000cc", "/ws/a", -time.Hour, false},
		{"tampered", "0000ee", "/ws/a", -2 * time.Hour, true},
		{"b0", "0000b0", "/ws/b", 0, true},
	} {
		ids[r.name] = writeRunAt(t, root, r.suffix, r.ws, t0.Add(r.at), r.seal).ID
	}
	p := filepath.Join(root, ids["tampered"], EventsFile)
	data, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), `"true"`, `"ture"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	live := t0.Add(3 * time.Hour)
	ids["live"] = live.Format("20060102T150405Z") + "-0000ff"
	w, err := Create(root, ids["live"], Options{Start: RunStart{Workspace: "/ws/a"}, now: func() time.Time { return live }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close(RunEnd{}) })
	mustWriteFile(t, filepath.Join(root, "notes.txt"), "not a run")
	if err := os.Mkdir(filepath.Join(root, "not-a-run"), 0o700); err != nil {
		t.Fatal(err)
	}
	return root, ids
}

func mustWriteFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestPrune(t *testing.T) {
	now := t0.Add(4 * time.Hour)
	tests := []struct {
		name          string
		opts          PruneOptions
		removed, kept []string
	}{
		{"keep 1 per workspace", PruneOptions{Keep: 1}, []string{"a2", "a1", "a0"}, []string{"crashed", "tampered"}},
		{"keep 3", PruneOptions{Keep: 3}, []string{"a0"}, []string{"crashed", "tampered"}},
		{"older than 3h", PruneOptions{OlderThan: 3 * time.Hour}, []string{"b0", "a0"}, []string{"crashed", "tampered"}},
		{"older than 3h and keep 3", PruneOptions{OlderThan: 3 * time.Hour, Keep: 3}, []string{"a0"}, []string{"crashed", "tampered"}},
		{"older than 30m: live run named, kept", PruneOptions{OlderThan: 30 * time.Minute}, []string{"a2", "a1", "b0", "a0"}, []string{"live", "crashed", "tampered"}},
		{"older than a day", PruneOptions{OlderThan: 24 * time.Hour}, nil, nil},
		{"dry run", PruneOptions{Keep: 1, DryRun: true}, []string{"a2", "a1", "a0"}, []string{"crashed", "tampered"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, ids := pruneRoot(t)
			before, _ := List(root)
			heads := map[string]string{}
			for _, s := range before {
				rep, _ := Verify(filepath.Join(root, s.ID, EventsFile))
				heads[s.ID] = rep.Head
			}
			tt.opts.now = func() time.Time { return now }
			res, err := Prune(root, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			var removed, kept []string
			for _, p := range res.Removed {
				removed = append(removed, nameOf(ids, p.Run))
			}
			for _, k := range res.Kept {
				kept = append(kept, nameOf(ids, k.Run))
				want := map[string]string{"live": "unsealed", "crashed": "unsealed", "tampered": "does not verify"}[nameOf(ids, k.Run)]
				if !strings.HasPrefix(k.Why, want) {
					t.Errorf("kept %s because %q; want %q", nameOf(ids, k.Run), k.Why, want)
				}
			}
			if !slices.Equal(removed, tt.removed) || !slices.Equal(kept, tt.kept) {
				t.Errorf("removed %v, kept %v; want %v, %v", removed, kept, tt.removed, tt.kept)
			}
			gone := map[string]bool{}
			if !tt.opts.DryRun {
				for _, p := range res.Removed {
					gone[p.Run] = true
				}
			}
			for name, id := range ids {
				_, err := os.Stat(filepath.Join(root, id))
				if gone[id] != errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: removed=%v but stat says %v", name, gone[id], err)
				}
			}
			for _, p := range []string{"notes.txt", "not-a-run"} {
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					t.Errorf("%s touched: %v", p, err)
				}
			}
			checkPruneFile(t, root, res.Removed, heads, !tt.opts.DryRun && len(res.Removed) > 0, now)
		})
	}
}

func nameOf(ids map[string]string, id string) string {
	for n, v := range ids {
		if v == id {
			return n
		}
	}
	return id
}

// checkPruneFile checks that the prune file records exactly removed (when want), each
// with the head the log had.
func checkPruneFile(t *testing.T, root string, removed []Pruned, heads map[string]string, want bool, now time.Time) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, PruneFile))
	if !want {
		if err == nil {
			t.Errorf("%s written by a prune that removed nothing", PruneFile)
			f.Close()
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Pruned
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var p Pruned
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if len(got) != len(removed) {
		t.Fatalf("%s has %d lines; want %d", PruneFile, len(got), len(removed))
	}
	for i, p := range got {
		g, _ := json.Marshal(p)
		w, _ := json.Marshal(removed[i])
		if string(g) != string(w) || p.V != Version || !p.TS.Equal(now) || p.Head != heads[p.Run] || p.Head == "" || p.Lines != 3 || p.Workspace == "" || p.Rule == "" {
			t.Errorf("line %d: %+v; want %+v with head %s", i+1, p, removed[i], heads[p.Run])
		}
	}
}

func TestPruneRefusesWithoutRule(t *testing.T) {
	root, _ := pruneRoot(t)
	for _, o := range []PruneOptions{{}, {Keep: -1}, {OlderThan: -time.Hour, Keep: 2}} {
		if _, err := Prune(root, o); !errors.Is(err, ErrBadPrune) {
			t.Errorf("Prune(%+v) = %v; want ErrBadPrune", o, err)
		}
	}
	if runs, _ := List(root); len(runs) != 7 {
		t.Errorf("%d runs left; want all 7", len(runs))
	}
}
