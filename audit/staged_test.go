package audit

import "testing"

// A refused entry is "path: why" and the sandbox chose the path: a name with ": " in it
// must not make the report call another path refused.
func TestSplitRefusedHostileNames(t *testing.T) {
	known := map[string]bool{"a": true, "a: b": true, "d": true, "d/x": true}
	for _, tc := range []struct{ in, path, why string }{
		{"a: b: a special file", "a: b", "a special file"},
		{"a: not writable", "a", "not writable"},
		{"d: the contract does not let the sandbox write it", "d", "the contract does not let the sandbox write it"},
		{"zz: y: unknown", "zz", "y: unknown"},
	} {
		path, why := splitRefused(tc.in, known)
		if path != tc.path || why != tc.why {
			t.Errorf("splitRefused(%q) = %q, %q; want %q, %q", tc.in, path, why, tc.path, tc.why)
		}
	}
}

// The staged panel lists what the diffs add up to: a file a command added and a later
// diff (a rollback, between commands) deleted again is not pending; one deleted and
// made again is modified; a rename is the old path's deletion and the new one's
// addition.
func TestStagedPathsNet(t *testing.T) {
	v := &view{diffs: []*FSDiff{
		{Changes: []FileChange{{Path: "new", Op: "added"}, {Path: "a", Op: "modified"}, {Path: "b", Op: "deleted"}}},
		{Changes: []FileChange{{Path: "new", Op: "deleted"}, {Path: "b", Op: "added"}, {Path: "d2", OldPath: "d1", Op: "renamed"}}},
	}}
	got := map[string]string{}
	for _, p := range v.stagedPaths() {
		got[p.Path] = p.Op
	}
	want := map[string]string{"a": "modified", "b": "modified", "d1": "deleted", "d2": "added"}
	if len(got) != len(want) {
		t.Fatalf("staged paths: got %v, want %v", got, want)
	}
	for p, op := range want {
		if got[p] != op {
			t.Errorf("%s: got %q, want %q", p, got[p], op)
		}
	}
}
