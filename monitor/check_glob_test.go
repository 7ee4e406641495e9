package monitor

import "testing"

// "**" in monitor.exec matches any depth, as in the contract's deny globs.
func TestExecGlobAnyDepth(t *testing.T) {
	for _, c := range []struct {
		pat, path string
		want      bool
	}{
		{"/usr/**/python3", "/usr/bin/python3", true},
		{"/usr/**/python3", "/usr/local/lib/x/bin/python3", true},
		{"/usr/*/python3", "/usr/local/bin/python3", false},
		{"/opt/**", "/opt/a/b/c", true},
		{"/opt/**", "/usr/bin/sh", false},
	} {
		if got := execMatches(c.pat, []string{c.path}, nil); got != c.want {
			t.Errorf("execMatches(%q, %q) = %v; want %v", c.pat, c.path, got, c.want)
		}
	}
}
