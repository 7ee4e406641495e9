package runner

import "testing"

// TestIsWithin: a stage's workspace lands only at or below the root it may land in.
func TestIsWithin(t *testing.T) {
	for _, tc := range []struct {
		path, dir string
		want      bool
	}{
		{"/srv/acme/workspaces/w", "/srv/acme/workspaces", true},
		{"/srv/acme/workspaces", "/srv/acme/workspaces", true},
		{"/srv/acme/workspaces/../../beta/workspaces/w", "/srv/acme/workspaces", false},
		{"/srv/beta/workspaces/w", "/srv/acme/workspaces", false},
		{"/srv/acme/workspaces-x/w", "/srv/acme/workspaces", false},
		{"w", "/srv/acme/workspaces", false},
	} {
		if got := isWithin(tc.path, tc.dir); got != tc.want {
			t.Errorf("isWithin(%q, %q) = %v; want %v", tc.path, tc.dir, got, tc.want)
		}
	}
}
