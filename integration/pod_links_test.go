//go:build k8s

package integration

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testSymlinkInPodCannotWidenAccess is TestSymlinkInWorkspaceCannotWidenAccess for a
// Pod, whose workspace is a copy: the host's links that leave the workspace are not
// put in it (a fill sends only what means the same there), so the attack is the
// other way round. A command makes links in the Pod that point out of the workspace,
// or a directory where the host has such a link, and a later command, or the sync
// that brings the Pod's workspace back, would follow them. Nothing reaches the host:
// the sync brings back no link that leaves the workspace and makes nothing through a
// link of the host's (it may replace one by what the Pod made at its name, as a
// command may replace any file of a writable workspace), and what a later command
// writes through a link in the Pod lands in the Pod's file system, never the host's.
// A link that stays inside does come back: the sync is not refusing every link.
func testSymlinkInPodCannotWidenAccess(t *testing.T) {
	w := newWorld(t)
	passwd, err := os.ReadFile("/etc/passwd")
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(filepath.Dir(w.ws), "outside")
	mustMkdir(t, outside)
	for link, target := range map[string]string{"passwd-link": "/etc/passwd", "home-link": w.home, "up-link": "../outside"} {
		if err := os.Symlink(target, filepath.Join(w.ws, link)); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(w.ws, "sub", "keep.txt"), "kept\n")
	id := w.startSession()
	inPod := func(script string) result {
		t.Helper()
		r := w.cordon("", "exec", id, "--", "sh", "-c", script)
		if !strings.Contains(r.stdout, "done\n") {
			t.Fatalf("the command did not run to its end: %v", r)
		}
		return r
	}

	// The host's links are not in the Pod: their names are free there. A command
	// fills them (a file, and directories whose entries the sync would make through
	// the host's links), makes links out of the workspace of its own, and replaces
	// the host's directory sub with one.
	r := inPod(`for l in passwd-link home-link up-link; do test -e $l || test -L $l || echo "$l=absent"; done
echo 'evil::0:0::/:/bin/sh' >> passwd-link
mkdir -p home-link/.ssh && echo evil-key > home-link/.ssh/authorized_keys
mkdir up-link && echo evil > up-link/planted
ln -s /etc/passwd abs-out; ln -s ../../../../../../../../../../etc/passwd up-out; ln -s / root-out
rm -rf sub && ln -s /etc sub
echo inside > inside.txt; ln -s inside.txt in-link
echo done`)
	for _, l := range []string{"passwd-link", "home-link", "up-link"} {
		assertContains(t, "the host's links in the Pod", r.stdout, l+"=absent\n")
	}
	// A later command follows the Pod's links: into the Pod's own file system.
	inPod(`echo 'evil::0:0::/:/bin/sh' >> abs-out; echo evil >> up-out; echo x > root-out/tmp/pod-only; echo x > sub/cordon-pod-pwned
cat abs-out >/dev/null 2>&1; echo done`)
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("session stop: %v", r)
	}

	if after, _ := os.ReadFile("/etc/passwd"); string(after) != string(passwd) {
		t.Fatal("/etc/passwd changed")
	}
	for _, p := range []string{
		filepath.Join(w.home, ".ssh", "authorized_keys"), filepath.Join(outside, "planted"), "/etc/cordon-pod-pwned",
		"/tmp/pod-only", filepath.Join(w.ws, "abs-out"), filepath.Join(w.ws, "up-out"), filepath.Join(w.ws, "root-out"),
	} {
		assertAbsent(t, p)
	}
	// The host's links: left as they were, or replaced by what the Pod made at
	// their names (a command may replace any file of a writable workspace; the sync
	// replaces without following), never pointing anywhere else. No other link on
	// the host leaves the workspace.
	hostLinks := map[string]string{"passwd-link": "/etc/passwd", "home-link": w.home, "up-link": "../outside"}
	filepath.WalkDir(w.ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		target, _ := os.Readlink(p)
		rel, _ := filepath.Rel(w.ws, p)
		if want, ok := hostLinks[rel]; ok {
			if target != want {
				t.Errorf("the host's link %s now points to %q, want %q", rel, target, want)
			}
			return nil
		}
		if j := filepath.Join(filepath.Dir(p), target); filepath.IsAbs(target) || (j != w.ws && !strings.HasPrefix(j, w.ws+"/")) {
			t.Errorf("the sync made %s, a link out of the workspace to %q", rel, target)
		}
		return nil
	})
	if data, err := os.ReadFile(filepath.Join(w.ws, "sub", "keep.txt")); err != nil || string(data) != "kept\n" {
		t.Errorf("sub, replaced in the Pod by a link to /etc: on the host %q, %v; want the directory kept", data, err)
	}
	// A link that stays inside comes back, as a link.
	if got, err := os.Readlink(filepath.Join(w.ws, "in-link")); err != nil || got != "inside.txt" {
		t.Errorf("a link inside the workspace made in the Pod: %q, %v; want it brought back", got, err)
	}
}
