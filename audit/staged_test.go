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
