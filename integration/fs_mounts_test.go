package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/contract"
)

// TestProtectedNamesMountedReadOnly reads the mount table a command sees: each
// protected name of the workspace (the host-executed files, present or kept absent by a
// placeholder, .git, cordon.yaml; under git: commit the pinned entries of .git) is a
// mount point of its own, read-only, in a writable workspace, and the masks over the
// host's secrets are mounted too, however cordon assembles them (bwrap binds, or
// trees placed by the hand-off: issue 39).
func TestProtectedNamesMountedReadOnly(t *testing.T) {
	var names []string
	for _, n := range contract.HostExecuted {
		names = append(names, strings.TrimSuffix(n, "/"))
	}
	names = append(names, "cordon.yaml")
	for _, c := range []struct {
		mode string
		yaml string
		git  []string
	}{
		{"git read-only", "", []string{".git"}},
		{"git commit", "version: 1\nfilesystem:\n  git: commit\n", []string{".git/config", ".git/hooks", ".git/info", ".git/objects/pack", ".git/commondir"}},
	} {
		t.Run(c.mode, func(t *testing.T) {
			w := newWorld(t)
			w.gitRepo()
			mustWrite(t, filepath.Join(w.ws, ".envrc"), "export A=1\n")
			if c.yaml != "" {
				w.contract(c.yaml)
			}
			r := w.sh("cat /proc/self/mountinfo; cat .envrc")
			if r.code != 0 {
				t.Fatalf("run: %v", r)
			}
			assertContains(t, "an existing protected file stays readable", r.stdout, "export A=1")
			opts := mountOptions(r.stdout)
			if o, ok := opts[w.ws]; !ok || !o["rw"] {
				t.Fatalf("the workspace %s is not a writable mount: %v", w.ws, opts[w.ws])
			}
			for _, n := range append(append([]string{}, names...), c.git...) {
				p := filepath.Join(w.ws, n)
				o, ok := opts[p]
				switch {
				case !ok:
					t.Errorf("%s is not a mount point", n)
				case !o["ro"] || !o["nosuid"] || !o["nodev"]:
					t.Errorf("%s is mounted %v; want ro, nosuid, nodev", n, o)
				}
			}
			if _, ok := opts["/etc/shadow"]; !ok {
				t.Error("/etc/shadow is not masked")
			}
		})
	}
}

// mountOptions maps each mount point of a mountinfo to the options of the mount on
// top there (the last line naming it).
func mountOptions(mountinfo string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(mountinfo, "\n") {
		f := strings.Split(line, " ")
		if len(f) < 7 || strings.Contains(f[4], `\`) {
			continue
		}
		o := map[string]bool{}
		for _, opt := range strings.Split(f[5], ",") {
			o[opt] = true
		}
		out[f[4]] = o
	}
	return out
}
