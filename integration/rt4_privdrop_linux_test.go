package integration

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/testutil"
)

// rt4MmapWrite is a sandbox command that rewrites the first five bytes of the
// workspace file rel through a shared mapping (which keeps its file capability).
func rt4MmapWrite(rel string) string {
	return `python3 -c 'import mmap,os; fd=os.open("` + rel + `",os.O_RDWR); m=mmap.mmap(fd,5); m[:5]=b"EVIL\n"; m.flush(); m.close()'`
}

// rt4CapTool makes the workspace file rel holding "orig\n" with cap_net_raw+ep.
func rt4CapTool(t *testing.T, w *world, rel string) string {
	t.Helper()
	testutil.RequireRoot(t)
	_, err := exec.LookPath("setcap")
	testutil.Require(t, err == nil, "getcap and setcap (libcap) are needed")
	_, err = exec.LookPath("python3")
	testutil.Require(t, err == nil, "python3 is needed for the mapping")
	p := filepath.Join(w.ws, filepath.FromSlash(rel))
	mustWrite(t, p, "orig\n")
	if out, err := exec.Command("setcap", "cap_net_raw+ep", p).CombinedOutput(); err != nil {
		t.Fatalf("setcap: %v: %s", err, out)
	}
	return p
}

// rt4AssertDisarmed fails when the host file p holds the sandbox's bytes and a
// file capability.
func rt4AssertDisarmed(t *testing.T, p string, r result) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v (run: %v)", p, err, r)
	}
	out, _ := exec.Command("getcap", p).CombinedOutput()
	if string(got) == "EVIL\n" && strings.Contains(string(out), "cap_net_raw") {
		t.Fatalf("the workspace's %s holds the sandbox's content (%q) and still its file capability: %s\nrun: %v",
			filepath.Base(p), got, out, r)
	}
}

// TestRT4RenamePairKeepsFileCapability (red team rt4): dropPrivileges disarms only
// what the diff lists Added or Modified; the diff pairs a deleted and an added path
// by content alone (pairRenames: digest and file type, not the inode nor its
// attributes) and lists them Renamed. The workspace holds payload, bytes of the
// sandbox's (written by an earlier run or command, say). The sandbox rewrites the
// capable tool through a mapping to the same bytes, removes payload and renames tool
// to payload2: the diff says payload was renamed payload2 and tool deleted, nothing
// is disarmed, and the host keeps payload2, the sandbox's bytes with cap_net_raw.
func TestRT4RenamePairKeepsFileCapability(t *testing.T) {
	w := newWorld(t)
	rt4CapTool(t, w, "tool")
	mustWrite(t, filepath.Join(w.ws, "payload"), "EVIL\n")
	r := w.sh(rt4MmapWrite("tool") + ` && rm payload && mv tool payload2`)
	if r.code != 0 {
		t.Fatalf("the run failed: %v", r)
	}
	rt4AssertDisarmed(t, filepath.Join(w.ws, "payload2"), r)
}

// TestRT4DiffBoundKeepsFileCapability (red team rt4): a change past
// limits.diff.entries is in no Change (the diff's gap counts it), and dropPrivileges
// reads Changes alone (quarantine sweeps the gap for repositories, not for
// privileges). The sandbox rewrites z/tool through a mapping and makes more files
// than the bound before z in the workspace's listing: the snapshot after the run stops
// before z, z/tool is not compared, and the host keeps the sandbox's bytes with the
// capability. The bound is 100 here to keep the test quick; the default 100,000
// entries cost the sandbox a second.
func TestRT4DiffBoundKeepsFileCapability(t *testing.T) {
	w := newWorld(t)
	tool := rt4CapTool(t, w, "z/tool")
	w.contract("version: 1\nlimits: {diff: {entries: 100}}\n")
	r := w.sh(rt4MmapWrite("z/tool") + ` && i=0 && while [ $i -lt 200 ]; do : > f$i; i=$((i+1)); done`)
	if r.code != 0 {
		t.Fatalf("the run failed: %v", r)
	}
	rt4AssertDisarmed(t, tool, r)
}

// TestRT4NestedRepoKeepsFileCapability (red team rt4): the scan never descends into
// a nested repository's .git (it fingerprints it), so a file in one is in no Change,
// and dropPrivileges never sees it. The workspace holds sub, a repository of its own
// (a checkout of another project), and the capable tool. The sandbox rewrites tool
// through a mapping and moves it into sub/.git: the diff lists tool deleted and
// sub/.git changed, quarantine renames sub/.git to sub/.git.cordon-quarantine, and
// the host keeps sub/.git.cordon-quarantine/tool, the sandbox's bytes with
// cap_net_raw. (A .git the sandbox makes is renamed as it appears, and what it
// holds is then diffed and disarmed.)
func TestRT4NestedRepoKeepsFileCapability(t *testing.T) {
	w := newWorld(t)
	rt4CapTool(t, w, "tool")
	if out, err := exec.Command("git", "init", "-q", filepath.Join(w.ws, "sub")).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	r := w.sh(rt4MmapWrite("tool") + ` && mv tool sub/.git/tool`)
	if r.code != 0 {
		t.Fatalf("the run failed: %v", r)
	}
	err := filepath.WalkDir(w.ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rt4AssertDisarmed(t, p, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rt4DeepTool is a sandbox program (python3 -c) that rewrites tool through a
// mapping and moves it below 20 directories of 250-byte names: a path of more than
// PATH_MAX (4,096) bytes, reached directory by directory.
const rt4DeepTool = `import mmap, os
fd = os.open("tool", os.O_RDWR)
m = mmap.mmap(fd, 5); m[:5] = b"EVIL\n"; m.flush(); m.close(); os.close(fd)
root = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
d = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
for i in range(20):
    n = ("%02d" % i) * 125
    os.mkdir(n, dir_fd=d)
    nd = os.open(n, os.O_RDONLY | os.O_DIRECTORY, dir_fd=d)
    os.close(d); d = nd
os.rename("tool", "tool", src_dir_fd=root, dst_dir_fd=d)`

// rt4DeepCheck is a host program (python3 -c, run in the workspace) that prints what
// the deep tool holds and whether it has a file capability.
const rt4DeepCheck = `import os
d = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
for i in range(20):
    d = os.open(("%02d" % i) * 125, os.O_RDONLY | os.O_DIRECTORY, dir_fd=d)
fd = os.open("tool", os.O_RDONLY, dir_fd=d)
print(repr(os.read(fd, 16)), "security.capability" in os.listxattr(fd))`

// TestRT4LongPathKeepsFileCapability (red team rt4): linux.Tree.DropPrivileges opens
// the changed file by its whole workspace path (openat2 beneath the workspace),
// which the kernel refuses past PATH_MAX (ENAMETOOLONG); the diff, which walks
// directory by directory, lists it Added all the same. The sandbox rewrites the
// capable tool through a mapping and moves it below directories whose path is longer
// than that: cordon warns that it "may keep" its capabilities, and the host keeps the
// sandbox's bytes with cap_net_raw.
func TestRT4LongPathKeepsFileCapability(t *testing.T) {
	w := newWorld(t)
	rt4CapTool(t, w, "tool")
	r := w.cordon("", "run", "--", "python3", "-c", rt4DeepTool)
	if r.code != 0 {
		t.Fatalf("the run failed: %v", r)
	}
	cmd := exec.Command("python3", "-c", rt4DeepCheck)
	cmd.Dir = w.ws
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("reading the deep tool: %v: %s", err, out)
	}
	if strings.TrimSpace(string(out)) == `b'EVIL\n' True` {
		t.Fatalf("the workspace's deep tool holds the sandbox's content and still its file capability (%s)\nrun: %v",
			strings.TrimSpace(string(out)), termTail(r.stderr))
	}
}

// termTail is the last 300 bytes of s.
func termTail(s string) string {
	if len(s) > 300 {
		return "…" + s[len(s)-300:]
	}
	return s
}

// TestRT4RenamePairKeepsSetUID (red team rt4): TestRT4RenamePairKeepsFileCapability
// with the set-user-ID bit: the workspace's tool is root's, mode 4755; the sandbox
// rewrites it through a mapping to the bytes of payload, removes payload and renames
// tool to payload2, which the diff lists Renamed. The host keeps payload2, a
// set-user-ID root program of the sandbox's bytes.
func TestRT4RenamePairKeepsSetUID(t *testing.T) {
	testutil.RequireRoot(t)
	_, err := exec.LookPath("python3")
	testutil.Require(t, err == nil, "python3 is needed for the mapping")
	w := newWorld(t)
	tool := filepath.Join(w.ws, "tool")
	mustWrite(t, tool, "orig\n")
	mustWrite(t, filepath.Join(w.ws, "payload"), "EVIL\n")
	for _, p := range []string{tool, filepath.Join(w.ws, "payload")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(tool, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	r := w.sh(rt4MmapWrite("tool") + ` && rm payload && mv tool payload2`)
	if r.code != 0 {
		t.Fatalf("the run failed: %v", r)
	}
	p := filepath.Join(w.ws, "payload2")
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run: %v)", err, r)
	}
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) == "EVIL\n" && st.Mode()&os.ModeSetuid != 0 {
		t.Fatalf("the workspace's payload2 holds the sandbox's content (%q) and is set-user-ID (%v)\nrun: %v", got, st.Mode(), r)
	}
}
