package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/event"
	"github.com/cordonhq/cordon/internal/testutil"
)

// mapperSrc maps a file shared and writable, closes its descriptor, waits for a file
// named go in the workspace, writes through the mapping (no event of the file system
// but the open, long before), makes a file named done, and holds the mapping until a
// file named quit appears (its unmapping, at exit, is the file's last close: an event):
// a process that holds a mapping across commands.
const mapperSrc = `package main

import (
	"os"
	"syscall"
	"time"
)

func main() {
	f, err := os.OpenFile(os.Args[1], os.O_RDWR, 0)
	if err != nil {
		panic(err)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, 1, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		panic(err)
	}
	f.Close()
	os.WriteFile("mapped", nil, 0o644)
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat("go"); err == nil {
			m[0] = 'L'
			os.WriteFile("done", nil, 0o644)
			break
		}
	}
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat("quit"); err == nil {
			return
		}
	}
}
`

// waitDone is the command that lets a mapper write and waits until it has.
const waitDone = "touch go; i=0; while [ ! -e done ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; test -e done"

// sessionDiffs are the fs.diff lines of session id so far: each command's by its id,
// and those between commands.
func sessionDiffs(t *testing.T, w *world, id string) (byCmd map[string]event.FSDiffBody, between []event.FSDiffBody) {
	t.Helper()
	byCmd = map[string]event.FSDiffBody{}
	for _, rec := range sessionEvents(t, w, id) {
		if rec.Type != "fs.diff" {
			continue
		}
		var d event.FSDiffBody
		if err := json.Unmarshal(rec.Body, &d); err != nil {
			t.Fatal(err)
		}
		if d.Between {
			between = append(between, d)
		} else {
			byCmd[rec.Cmd] = d
		}
	}
	return byCmd, between
}

// lastDiff is the fs.diff of session id's latest command.
func lastDiff(t *testing.T, w *world, id string) event.FSDiffBody {
	t.Helper()
	last, seq := event.FSDiffBody{}, -1
	byCmd, _ := sessionDiffs(t, w, id)
	for cmd, d := range byCmd {
		if n, err := strconv.Atoi(cmd); err == nil && n > seq {
			last, seq = d, n
		}
	}
	if seq < 0 {
		t.Fatal("no command's fs.diff in the log")
	}
	return last
}

func diffNames(d event.FSDiffBody, p string) bool {
	for _, c := range d.Changes {
		if c.Path == p || c.OldPath == p {
			return true
		}
	}
	return false
}

// TestSessionChangeSets: a session's commands take their diffs from the live watch's
// change set, and a write no event shows is still in a diff: through a shared mapping
// that a process left by an earlier command holds (the session then walks, and says
// why), or that another command running at the same time holds. On every backend
// whose sandbox writes the host's workspace.
func TestSessionChangeSets(t *testing.T) {
	testutil.RequireRoot(t)
	t.Run("bwrap", func(t *testing.T) { testSessionChangeSets(t) })
	forEachContainerBackend(t, func(t *testing.T, _ string) { testSessionChangeSets(t) })
}

func testSessionChangeSets(t *testing.T) {
	w := newWorld(t)
	buildProgram(t, w, "mapper", mapperSrc)
	mustWrite(t, filepath.Join(w.ws, "sub", "victim"), "original\n")
	mustWrite(t, filepath.Join(w.ws, "other"), "original\n")
	id := w.startSession()
	exec := func(script string) {
		t.Helper()
		if r := w.cordon("", "exec", id, "--", "sh", "-c", script); r.code != 0 {
			t.Fatalf("exec %q: %v", script, r)
		}
	}

	// Alone, with nothing left running: the change set, and every change in it.
	exec("echo more >> other; mkdir -p d/e; echo new > d/e/f; mv d d2; chmod 600 other")
	d := lastDiff(t, w, id)
	if !d.Scan.Watched {
		t.Fatalf("a lone command's diff walked: %q", d.Scan.Walked)
	}
	for _, p := range []string{"other", "d2/e/f"} {
		if !diffNames(d, p) {
			t.Errorf("%s is not in the watched diff: %+v", p, d.Changes)
		}
	}

	// A process left in the background holds a mapping; it writes while the next
	// command runs.
	settle(t, exec, filepath.Join(w.ws, "sub", "victim"))
	exec("./mapper sub/victim >/dev/null 2>&1 & i=0; while [ ! -e mapped ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done")
	exec(waitDone)
	d = lastDiff(t, w, id)
	if !diffNames(d, "sub/victim") {
		t.Errorf("a write through a mapping a process left by an earlier command holds is not in the diff of the command it wrote during (walked %q): %+v", d.Scan.Walked, d.Changes)
	}
	if d.Scan.Watched || d.Scan.Walked == "" {
		t.Errorf("the diff beside a process left running did not walk, or did not say why: %+v", d.Scan)
	}
	mustWrite(t, filepath.Join(w.ws, "quit"), "")
	waitGone(t, "mapper sub/victim")
	exec("rm -f go done mapped quit")

	// Two commands at once: one holds a mapping from before the other started.
	mustWrite(t, filepath.Join(w.ws, "sub", "victim"), "original\n")
	settle(t, exec, filepath.Join(w.ws, "sub", "victim"))
	held := w.background("exec", id, "--", "sh", "-c", "./mapper sub/victim")
	waitFile(t, filepath.Join(w.ws, "mapped"))
	exec(waitDone)
	mustWrite(t, filepath.Join(w.ws, "quit"), "")
	if r := held.wait(t); r.code != 0 {
		t.Fatalf("the mapping command: %v", r)
	}
	d = lastDiff(t, w, id)
	byCmd, _ := sessionDiffs(t, w, id)
	found := false
	for _, d := range byCmd {
		found = found || diffNames(d, "sub/victim")
	}
	if !found {
		t.Errorf("a write through a mapping held by a concurrent command is in no command's diff: %+v", byCmd)
	}
	if d.Scan.Watched {
		t.Errorf("a diff beside a concurrent command came from the change set")
	}

	// Nothing left running any more: the change set again, and what the host
	// changes between commands is logged between them.
	mustWrite(t, filepath.Join(w.ws, "host.txt"), "from the host\n")
	mustMkdir(t, filepath.Join(w.ws, "hostdir"))
	if err := os.Rename(filepath.Join(w.ws, "d2"), filepath.Join(w.ws, "d3")); err != nil {
		t.Fatal(err)
	}
	exec("echo again >> other")
	d = lastDiff(t, w, id)
	if !d.Scan.Watched || !diffNames(d, "other") {
		t.Errorf("once nothing is left running the diff is not the change set's again: %+v", d)
	}
	_, between := sessionDiffs(t, w, id)
	for _, p := range []string{"host.txt", "hostdir", "d3/e/f"} {
		logged := false
		for _, b := range between {
			logged = logged || diffNames(b, p)
		}
		if !logged {
			t.Errorf("the host's change of %s between commands is not logged between them: %+v", p, between)
		}
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatal(r)
	}
	if v := w.cordon("", "audit", "verify", id); v.code != 0 {
		t.Fatalf("verify: %v", v)
	}
}

// settle waits until p's last change is well past the window in which a snapshot
// re-reads a file whatever the change set says (fsdiff's racy window, 100 ms), and
// runs a command, whose snapshot re-reads it once more: from then on only the change
// set would make a diff read it. What follows then tests the change set, not the
// racy rule.
func settle(t *testing.T, exec func(string), p string) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if wait := 300*time.Millisecond - time.Since(fi.ModTime()); wait > 0 {
		time.Sleep(wait) // the condition is the clock itself
	}
	exec("true")
}

// waitFile waits until p exists.
func waitFile(t *testing.T, p string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear", p)
}

// waitGone waits until no process's command line holds cmdline.
func waitGone(t *testing.T, cmdline string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if len(processesMatching(cmdline)) == 0 {
			return
		}
	}
	t.Fatalf("%s did not exit", cmdline)
}

// TestRedSessionChangesetRandom: TestRedChangesetRandom's random changes, one sequence
// per command of one session; each command's diff, with what is logged between
// commands, holds every path it changed, and comes from the change set (its commands
// leave nothing running).
func TestRedSessionChangesetRandom(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	randomTree(t, w.ws)
	id := w.startSession()
	for seed := range seeds() {
		before := treeRecord(t, w.ws)
		if r := w.cordon("", "exec", id, "--", "sh", "-c", randomChanges, "sh", strconv.Itoa(seed+2000), "300"); r.code != 0 {
			t.Fatalf("exec: %v", r)
		}
		after := treeRecord(t, w.ws)
		d := lastDiff(t, w, id)
		if !d.Scan.Watched {
			t.Errorf("seed %d: walked: %s", seed, d.Scan.Walked)
		}
		diffCovers(t, fmt.Sprintf("seed %d: ", seed), before, after, d)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatal(r)
	}
}
