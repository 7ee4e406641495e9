package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// runOnSharedRoot runs cordon with args in the workspace from a mount namespace of its
// own whose every mount is shared, as on a systemd host (where / is rshared): the
// hand-off's clones of a shared mount join its peer group. It returns the mount points
// of that namespace before and after the run, and the run's output. The test machine's
// own mounts are not touched: the namespace is the test's.
func runOnSharedRoot(t *testing.T, w *world, args ...string) (before, after []string, r result) {
	t.Helper()
	testutil.RequireRoot(t)
	_, err := exec.LookPath("unshare")
	testutil.Require(t, err == nil, "unshare (util-linux) is not installed")
	const sep = "=== cordon ran ===\n"
	script := `set -e
mount --make-rshared /
awk '{print $5}' /proc/self/mountinfo
set +e
"$@" >&2
echo "exit $?" >&2
printf '` + strings.TrimSuffix(sep, "\n") + `\n'
awk '{print $5}' /proc/self/mountinfo
ls -ln /etc/shadow >&2
touch .git/cordon-host-probe && echo "host can write .git" >&2
"$@" >&2
echo "second run: exit $?" >&2
`
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", append([]string{"-m", "--propagation", "unchanged", "sh", "-c", script, "sh", testutil.Cordon(t)}, args...)...)
	cmd.Dir = w.ws
	cmd.Env = w.env
	r = runResult(t, cmd, "unshare")
	b, a, ok := strings.Cut(r.stdout, sep)
	if r.code != 0 || !ok {
		t.Fatalf("the shared-root namespace: %v", r)
	}
	return strings.Fields(b), strings.Fields(a), r
}

// TestRedNestedMountsLeakToSharedHost: on a host whose mounts are shared (systemd makes
// / rshared), the read-only trees the hand-off places inside a handed-over tree (issue 39:
// the workspace's protected names, the masks over /etc/shadow in /etc) propagate out of
// the hand-off's private namespace into the host's, through the clone's peer group: a
// default run leaves an empty, unreadable mask mounted over the host's own /etc/shadow
// (and gshadow, opasswd, ssl/private) and an idmapped read-only mount over each
// protected name of the workspace (.git included: host git can no longer write it),
// all of it left behind when the run ends (host git then calls the repository of
// dubious ownership, and the next run fails on a cordon.yaml placeholder it could not
// remove). Before the change bwrap made these binds in
// its own (slave) namespace and nothing reached the host.
func TestRedNestedMountsLeakToSharedHost(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		setup func(w *world)
	}{
		{"default", nil, func(w *world) { w.gitRepo() }},
		{"git commit", nil, func(w *world) {
			w.gitRepo()
			w.contract("version: 1\nfilesystem:\n  git: commit\n")
		}},
		{"staged", []string{"--stage"}, func(w *world) { w.gitRepo() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			c.setup(w)
			args := append(append([]string{"run", "--backend", "bwrap"}, c.args...), "--", "true")
			before, after, r := runOnSharedRoot(t, w, args...)
			var leaked []string
			for _, m := range after {
				if !slices.Contains(before, m) && !otherMounter(m) {
					leaked = append(leaked, m)
				}
			}
			if len(leaked) > 0 {
				t.Errorf("the run left %d mounts in the caller's (shared) mount namespace, e.g. %v\n%s",
					len(leaked), leaked[:min(len(leaked), 6)], r.stderr)
			}
			assertContains(t, "the host writes its own .git after the run", r.stderr, "host can write .git")
			assertContains(t, "a second run on the same workspace starts", r.stderr, "second run: exit 0")
			for _, m := range leaked {
				if m == "/etc/shadow" {
					t.Errorf("the host's /etc/shadow is masked after the run: %s", r.stderr)
				}
				if m == filepath.Join(w.ws, ".git") {
					t.Errorf("the host's %s is a read-only mount after the run", m)
				}
			}
		})
	}
}

// otherMounter reports whether mount point m is one that processes other than the
// run's make while it runs, and that propagates into the shared namespace from the
// host's: the test cluster's kubelet (a Pod's volumes, in make test's other lane) and
// the container engines.
func otherMounter(m string) bool {
	for _, dir := range []string{"/var/lib/cordon-k8s/", "/var/lib/kubelet/", "/run/containerd/", "/var/lib/containerd/",
		"/var/lib/docker/", "/run/docker/", "/run/netns/"} {
		if strings.HasPrefix(m, dir) {
			return true
		}
	}
	return false
}
