package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Red team 5 (5f53348: a stop waits for the teardown): a session stop is bounded
// (docs/sessions.md), whatever another client of the session's socket does.

// rt5Stop runs `cordon session stop id` bounded by d; timedOut says d ran out.
func rt5Stop(t *testing.T, w *world, id string, d time.Duration) (r result, took time.Duration, timedOut bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.Cordon(t), "session", "stop", id)
	cmd.Dir, cmd.Env = w.ws, w.env
	began := time.Now()
	r = runResult(t, cmd, "cordon session stop")
	return r, time.Since(began), ctx.Err() != nil
}

// TestRT5StopWithAStalledExecReader: a `cordon exec` whose output nobody reads (piped
// into a pager left alone, suspended with ^Z) must not make a stop from another shell
// wait for it. The supervisor's write of the command's output to that client blocks;
// the stop cancels the command, but control.exec waits for its output copiers without
// bound (stdio.wait: `<-done` after closing the read ends, which does not unblock a
// copier blocked in its Write), and Session.stop's s.wg.Wait() waits for that exec.
// Before: the stop hangs until the exec's client dies (here: the test's bound).
func TestRT5StopWithAStalledExecReader(t *testing.T) {
	testutil.RequireRoot(t)
	w := teardownWorld(t, "bwrap")
	id := w.startSession()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ex := exec.Command(testutil.Cordon(t), "exec", id, "--", "yes")
	ex.Dir, ex.Env, ex.Stdout = w.ws, w.env, pw // pr is never read: the pager left alone
	if err := ex.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() {
		pr.Close() // the exec dies of SIGPIPE; the supervisor can then end
		_ = ex.Wait()
		waitFor(t, 30*time.Second, "the supervisor to end", func() bool {
			_, err := os.Stat(filepath.Join(w.sessionsDir(), id+".json"))
			return os.IsNotExist(err)
		})
	})
	waitFor(t, 15*time.Second, "the command to start", func() bool {
		data, _ := os.ReadFile(filepath.Join(w.auditRoot(), id, "events.jsonl"))
		return strings.Contains(string(data), `"cmd.start"`)
	})
	// The stop waits 2 s for the commands it cancelled before hanging up: yes has filled
	// the pipe and both socket buffers long before.
	r, took, timedOut := rt5Stop(t, w, id, 40*time.Second)
	if timedOut {
		t.Fatalf("session stop did not return within %s while an exec's client did not read its output "+
			"(docs/sessions.md: a stop is bounded)", took.Round(time.Second))
	}
	assertNoPanic(t, "session stop", r.stderr)
	t.Logf("stop: %v in %s", r, took.Round(time.Millisecond))
}

// TestRT5AcceptSurvivesFdExhaustion: connections that send nothing, as many as the
// supervisor has descriptors, make its Accept fail (EMFILE) once; accept() returns on
// any error, so the socket is never served again, even once they are all closed:
// every later exec and stop connects (the listener's backlog) and waits for ever. A
// local client of the same user needs nothing but connect(2) to make the session
// unstoppable but by a signal. The supervisor's limit is lowered with prlimit(1) to
// keep the test light; at its own limit (20000 here) two processes holding 10000
// idle connections each did the same.
// Before: the exec after the connections are closed is never answered.
func TestRT5AcceptSurvivesFdExhaustion(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Fatalf("prlimit (util-linux): %v", err) // on every host the tests install
	}
	w := teardownWorld(t, "bwrap")
	id := w.startSession()
	sup := sessionPID(t, w, id)
	t.Cleanup(func() {
		// The socket may never answer the world's stop: the supervisor is interrupted,
		// while its record says it still runs (its pid is not another process's yet).
		if _, err := os.Stat(filepath.Join(w.sessionsDir(), id+".json")); err == nil {
			if p, err := os.FindProcess(sup); err == nil {
				_ = p.Signal(os.Interrupt)
			}
		}
		waitFor(t, 30*time.Second, "the supervisor to end", func() bool {
			_, err := os.Stat(filepath.Join(w.sessionsDir(), id+".json"))
			return os.IsNotExist(err)
		})
	})
	// The limit is what the supervisor holds (its sockets, logs, and the placeholders
	// it holds open for the session's life) and 64 more.
	fds := func() int { ents, _ := os.ReadDir("/proc/" + strconv.Itoa(sup) + "/fd"); return len(ents) }
	base := fds()
	limit := base + 64
	t.Logf("the supervisor holds %d descriptors", base)
	if out, err := exec.Command("prlimit", "--pid", strconv.Itoa(sup), fmt.Sprintf("--nofile=%d:%d", limit, limit)).CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v: %s", err, out)
	}
	sock := filepath.Join(w.sessionsDir(), id+".sock")
	var idle []net.Conn
	for range limit + 64 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			break // the backlog is full
		}
		idle = append(idle, c)
	}
	waitFor(t, 15*time.Second, "the supervisor's descriptors to run out", func() bool { return fds() >= limit-6 })
	for _, c := range idle {
		c.Close()
	}
	waitFor(t, 15*time.Second, "the idle connections to be closed", func() bool { return fds() < base+30 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testutil.Cordon(t), "exec", id, "--", "true")
	cmd.Dir, cmd.Env = w.ws, w.env
	r := runResult(t, cmd, "cordon exec")
	if ctx.Err() != nil {
		t.Fatalf("an exec sent once the idle connections were closed was never answered: the supervisor stopped accepting (%v)", r)
	}
	if r.code != 0 {
		t.Errorf("exec: %v", r)
	}
	r, took, timedOut := rt5Stop(t, w, id, 30*time.Second)
	if timedOut || r.code != 0 {
		t.Errorf("stop (%s): %v", took.Round(time.Millisecond), r)
	}
}

// TestRT5StopAfterASignalSaysSo: a stop kept while a SIGTERM to the supervisor tears
// the session down is answered with an error naming the signal, as run.end does
// (reason "signal"), not "done" as if the stop had ended the session. An exec whose
// client reads nothing holds the teardown for its drain grace: the stop is sent then.
func TestRT5StopAfterASignalSaysSo(t *testing.T) {
	testutil.RequireRoot(t)
	w := teardownWorld(t, "bwrap")
	id := w.startSession()
	sup := sessionPID(t, w, id)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	ex := exec.Command(testutil.Cordon(t), "exec", id, "--", "yes")
	ex.Dir, ex.Env, ex.Stdout = w.ws, w.env, pw
	if err := ex.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	defer func() { pr.Close(); _ = ex.Wait() }()
	waitFor(t, 15*time.Second, "the command to start", func() bool {
		data, _ := os.ReadFile(filepath.Join(w.auditRoot(), id, "events.jsonl"))
		return strings.Contains(string(data), `"cmd.start"`)
	})
	if err := linux.Kill(sup, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "the signal's teardown to begin", func() bool {
		return w.cordon("", "session", "sweep", id).code != 0
	})
	r, took, timedOut := rt5Stop(t, w, id, 40*time.Second)
	if timedOut {
		t.Fatalf("the stop did not return (%s)", took)
	}
	assertNoPanic(t, "session stop", r.stderr)
	// Kept, it is answered with the signal; sent after the teardown, it finds no
	// session: 125 either way, never "done".
	if r.code != 125 {
		t.Errorf("a stop kept during a signal's teardown: want 125, got %v", r)
	}
	assertSealed(t, w, id, audit.ReasonSignal, "")
	assertSessionGone(t, w, "bwrap", id)
}
