package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Red team rt10: placeholders and their masks across a session's life, container
// backends, adoption, and the MCP gate tool's host-side account.

// rt10Flood is the sandbox's side of TestRT10SessionStopDropsMaskEvent: a process left
// in the background by a session's command waits for the host's signal (go, made once
// the host removed the .envrc placeholder), makes a contract in each of n directories
// (each one a rename on the host by the live watch, which backlogs its queue behind
// them), then writes the .envrc that direnv would run.
const rt10Flood = `mkdir flood && cd flood && seq 1 %N% | xargs mkdir && cd .. &&
setsid sh -c 'while [ ! -e go ]; do :; done
for k in 1 2 3; do (i=$k; while [ $i -lt %N% ]; do : > flood/$i/cordon.yaml; i=$((i+4)); done) & done
i=4; while [ $i -lt %N% ]; do : > flood/$i/cordon.yaml; i=$((i+4)); done
echo "echo pwned-by-the-sandbox" > .envrc
while :; do sleep 1; done' </dev/null >/dev/null 2>&1 &
echo started`

// TestRT10SessionStopDropsMaskEvent (held on b32618c: the watch kept up with four
// shell loops of the sandbox on the 2-core VM, and renamed the .envrc aside before the
// stop; kept as the attack's regression test): a session's live watch reads
// the fanotify queue behind the sandbox; `cordon session stop` kills the sandbox and
// then closes the watch (stopWatch) without reading what the kernel still queues, and
// no check of the masks runs at the stop (maskedGone runs at a command's end only).
// The host removes the .envrc placeholder during the session (git clean -fdx does;
// its mask in the sandbox goes with it); a process the session's command left behind
// backlogs the watch with contracts to disarm, then writes .envrc. A stop that comes
// while the watch is behind would leave the sandbox's .envrc in the workspace, never
// renamed aside, for direnv to run. A sandbox that floods faster than shell loops do
// (a compiled program, more cores) may win the race: the stop reads the queue to its
// end, or checks the masks once the sandbox is gone, to close it.
func TestRT10SessionStopDropsMaskEvent(t *testing.T) {
	testutil.Require(t, os.Geteuid() == 0, "the live watch needs root")
	w := newWorld(t)
	id := w.startSession()
	envrc := filepath.Join(w.ws, ".envrc")
	if _, err := os.Lstat(envrc); err != nil {
		t.Fatalf("no .envrc placeholder on the host: %v", err)
	}
	script := strings.ReplaceAll(rt10Flood, "%N%", "6000")
	if r := w.cordon("", "exec", id, "--", "sh", "-c", script); r.code != 0 || !strings.Contains(r.stdout, "started") {
		t.Fatalf("exec: %v", r)
	}
	if err := os.Remove(envrc); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(w.ws, "go"), "")
	waitFor(t, 60*time.Second, "the sandbox's .envrc", func() bool {
		b, err := os.ReadFile(envrc)
		if err == nil && strings.Contains(string(b), "pwned") {
			return true
		}
		m, _ := filepath.Glob(envrc + ".cordon-quarantine*")
		return len(m) > 0
	})
	r := w.cordon("", "session", "stop", id)
	t.Logf("stop: %v", r)
	if b, err := os.ReadFile(envrc); err == nil && strings.Contains(string(b), "pwned") {
		t.Fatalf("the sandbox's .envrc is left in the workspace after the stop, armed: %q", b)
	}
}

// rt10Flooder is TestRT10SessionStopDropsMaskEventFast's sandbox side, compiled: as
// rt10Flood, with four writers that make files faster than shell loops do.
const rt10Flooder = `package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	depth, _ := strconv.Atoi(os.Args[2])
	bangs, _ := strconv.Atoi(os.Args[3])
	for i := 0; i < bangs; i++ {
		os.WriteFile(fmt.Sprintf("!%06d", i), nil, 0o644)
	}
	base := "s" + strings.Repeat("/a", depth)
	for i := 0; i < n; i++ {
		d := filepath.Join(base, strconv.Itoa(i))
		os.MkdirAll(d, 0o755)
		q := filepath.Join(d, "q")
		os.WriteFile(q, nil, 0o644)
		os.Link(q, filepath.Join(d, "cordon.yaml.cordon-quarantine"))
		for k := 2; k <= 100; k++ {
			os.Link(q, filepath.Join(d, fmt.Sprintf("cordon.yaml.cordon-quarantine-%d", k)))
		}
	}
	os.WriteFile("ready", nil, 0o644)
	for {
		if _, err := os.Stat("go"); err == nil {
			break
		}
	}
	for i := 0; i < n; i++ {
		if f, err := os.Create(filepath.Join(base, strconv.Itoa(i), "cordon.yaml")); err == nil {
			f.Close()
		}
	}
	os.WriteFile(".envrc", []byte("echo pwned-by-the-sandbox\n"), 0o644)
	os.WriteFile("written", nil, 0o644)
	for {
		time.Sleep(time.Second)
	}
}
`

// TestRT10SessionStopDropsMaskEventFast: TestRT10SessionStopDropsMaskEvent with a
// compiled flooder in the sandbox that makes each of the watch's disarms slow: a
// contract made in a directory where the numbered names quarantine tries
// (PATH.cordon-quarantine, -2 … -9; the flooder takes up to -100, as an earlier cordon
// tried) are taken costs it ten renames in a directory 200 levels deep.
func TestRT10SessionStopDropsMaskEventFast(t *testing.T) {
	rt10StopRace(t, "", 0)
}

// TestRT10SessionStopBoundedDiff: as TestRT10SessionStopDropsMaskEventFast, with the
// workspace past the contract's limits.diff.entries by names that sort before .envrc
// (the sandbox makes them; at the default bound, 100,000, a compiled program makes them
// in a second or two). The session's stop diffs what changed since the last command
// (closeBetween), and the quarantine that runs on that diff is where the masks are
// checked once the sandbox is gone (maskedGone); a diff with no change, as one whose
// bound ends before .envrc is, runs none.
func TestRT10SessionStopBoundedDiff(t *testing.T) {
	rt10StopRace(t, "version: 1\nlimits:\n  diff:\n    entries: 1000\n", 3000)
}

// rt10StopRace runs the flooder in a session (with the contract, when not "", and bangs
// names before .envrc), removes the .envrc placeholder, and stops the session as soon
// as the sandbox's .envrc is there: it must not be left in the workspace.
func rt10StopRace(t *testing.T, contract string, bangs int) {
	testutil.Require(t, os.Geteuid() == 0, "the live watch needs root")
	w := newWorld(t)
	if contract != "" {
		w.contract(contract)
	}
	buildFlooder(t, w)
	id := w.startSession()
	envrc := filepath.Join(w.ws, ".envrc")
	if _, err := os.Lstat(envrc); err != nil {
		t.Fatalf("no .envrc placeholder on the host: %v", err)
	}
	run := fmt.Sprintf("setsid ./flooder 1000 200 %d </dev/null >/dev/null 2>&1 & echo started", bangs)
	if r := w.cordon("", "exec", id, "--", "sh", "-c", run); r.code != 0 || !strings.Contains(r.stdout, "started") {
		t.Fatalf("exec: %v", r)
	}
	waitFor(t, 120*time.Second, "the flooder's directories", func() bool {
		_, err := os.Stat(filepath.Join(w.ws, "ready"))
		return err == nil
	})
	// A command's end: the session's baseline holds the flooder's names.
	if r := w.cordon("", "exec", id, "--", "true"); r.code != 0 {
		t.Fatalf("exec: %v", r)
	}
	if err := os.Remove(envrc); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(w.ws, "go"), "")
	how := ""
	waitFor(t, 60*time.Second, "the sandbox's .envrc", func() bool {
		b, err := os.ReadFile(envrc)
		if err == nil && strings.Contains(string(b), "pwned") {
			how = "written, not yet renamed aside"
			return true
		}
		m, _ := filepath.Glob(envrc + ".cordon-quarantine*")
		how = "renamed aside already"
		return len(m) > 0
	})
	t.Logf("the stop comes with the sandbox's .envrc %s", how)
	r := w.cordon("", "session", "stop", id)
	if b, err := os.ReadFile(envrc); err == nil && strings.Contains(string(b), "pwned") {
		t.Fatalf("the sandbox's .envrc is left in the workspace after the stop, armed: %q\nstop: %v", b, r)
	}
}

// TestRT10ContainerSessionStop: TestRT10SessionStopBoundedDiff against the container
// backends (docker, containerd), whose masks are the engine's mounts on the same
// placeholders.
func TestRT10ContainerSessionStop(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, _ string) {
		rt10StopRace(t, "version: 1\nlimits:\n  diff:\n    entries: 1000\n", 3000)
	})
}

// TestRT10SupervisorKilledThenGC: a session's supervisor is killed (SIGKILL) while a
// process its command left behind tries, again and again, to write .envrc through its
// mask; `cordon gc` runs at once and removes the dead run's placeholders. Were any of
// the sandbox left when they go (a container the engine has not stopped yet: the
// container backends' gc runs after the run directories'), the mask would go with the
// placeholder and the write would land on the host, with no watch left to see it.
func TestRT10SupervisorKilledThenGC(t *testing.T) {
	t.Run("bwrap", rt10SupervisorKilledThenGC)
	forEachContainerBackend(t, func(t *testing.T, _ string) { rt10SupervisorKilledThenGC(t) })
}

func rt10SupervisorKilledThenGC(t *testing.T) {
	w := newWorld(t)
	id := w.startSession()
	pid := sessionPID(t, w, id)
	envrc := filepath.Join(w.ws, ".envrc")
	if _, err := os.Lstat(envrc); err != nil {
		t.Fatalf("no .envrc placeholder on the host: %v", err)
	}
	loop := `setsid sh -c 'while :; do echo "echo pwned-after-gc" > .envrc; : > alive; done' </dev/null >/dev/null 2>&1 & echo started`
	if r := w.cordon("", "exec", id, "--", "sh", "-c", loop); r.code != 0 || !strings.Contains(r.stdout, "started") {
		t.Fatalf("exec: %v", r)
	}
	alive := filepath.Join(w.ws, "alive")
	waitFor(t, 10*time.Second, "the writer", func() bool { _, err := os.Stat(alive); return err == nil })
	if err := linux.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := w.cordon("", "gc")
	t.Logf("gc: %v", r)
	// Whatever is left of the sandbox goes with the second gc (containers included).
	w.cordon("", "gc")
	if b, err := os.ReadFile(envrc); err == nil && strings.Contains(string(b), "pwned") {
		t.Fatalf("the sandbox's .envrc is in the workspace after gc: %q", b)
	}
}

// TestRT10WatchBacklog (fails on 07f6f4f; partly fixed, see below): the live watch
// disarms what the sandbox makes "the moment the kernel creates it", so that a host
// tool polling the workspace (an editor's git) never obeys it. The sandbox made each
// of its disarms slow: a contract made in a directory 600 levels deep where the 100
// numbered quarantine names are taken cost the watch 101 renames, each an openat2 of
// the whole path (disarmPath). With 1,500 of them the .envrc the sandbox then wrote,
// once the host removed the placeholder, stood armed on the host 9.4 s (19.8 s with
// 3,000) before the watch renamed it aside. disarmPath now reaches the directory once
// for all its names, and tries nine numbered names, not a hundred, before random
// ones: at most ten renames an event that the sandbox can force. The delay
// from the sandbox's .envrc to its renaming aside is measured; a watch that keeps up
// does it within a second. The test makes 600 such directories (about 3.8 s before
// the fix, by the figures above; 1,500 cost the test 40 s).
func TestRT10WatchBacklog(t *testing.T) {
	testutil.Require(t, os.Geteuid() == 0, "the live watch needs root")
	w := newWorld(t)
	buildFlooder(t, w)
	id := w.startSession()
	envrc := filepath.Join(w.ws, ".envrc")
	if r := w.cordon("", "exec", id, "--", "sh", "-c", "setsid ./flooder 600 600 0 </dev/null >/dev/null 2>&1 & echo started"); r.code != 0 {
		t.Fatalf("exec: %v", r)
	}
	waitFor(t, 120*time.Second, "the flooder's directories", func() bool {
		_, err := os.Stat(filepath.Join(w.ws, "ready"))
		return err == nil
	})
	if err := os.Remove(envrc); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(w.ws, "go"), "")
	var written time.Time
	waitFor(t, 60*time.Second, "the sandbox's .envrc", func() bool {
		b, err := os.ReadFile(envrc)
		if err == nil && strings.Contains(string(b), "pwned") && written.IsZero() {
			written = time.Now()
		}
		m, _ := filepath.Glob(envrc + ".cordon-quarantine*")
		return len(m) > 0
	})
	if written.IsZero() {
		t.Log("the .envrc was renamed aside before it was seen")
		return
	}
	took := time.Since(written)
	t.Logf("the sandbox's .envrc stood armed at least %v", took)
	if took > time.Second {
		t.Errorf("the live watch renamed the sandbox's .envrc aside %v after it was written: a host tool had that long to obey it", took)
	}
}

// buildFlooder builds rt10Flooder, static, into w's workspace as ./flooder.
func buildFlooder(t *testing.T, w *world) {
	t.Helper()
	buildProgram(t, w, "flooder", rt10Flooder)
}

// buildProgram builds the Go program src, static, into w's workspace as name.
func buildProgram(t *testing.T, w *world, name, src string) {
	t.Helper()
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "main.go"), src)
	mustWrite(t, filepath.Join(dir, "go.mod"), "module "+name+"\n\ngo 1.22\n")
	build := exec.Command("go", "build", "-o", filepath.Join(w.ws, name), ".")
	build.Dir, build.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", name, err, out)
	}
}
