package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
)

// backendOf is the backend a world's cordon uses ("" means its default).
func backendOf(w *world) string {
	for _, kv := range w.env {
		if b, ok := strings.CutPrefix(kv, "CORDON_BACKEND="); ok {
			return b
		}
	}
	return ""
}

// TestSessionContainerRemovedAtStop: a container session's container exists while it
// runs and is gone after stop.
func TestSessionContainerRemovedAtStop(t *testing.T) {
	for _, b := range containerBackends {
		t.Run(b, func(t *testing.T) {
			requireEngines(t)
			t.Setenv("CORDON_BACKEND", b)
			w := newWorld(t)
			id := w.startSession()
			if r := w.cordon("", "exec", id, "--", "sh", "-c", "echo 1 > /tmp/n"); r.code != 0 {
				t.Fatalf("exec: %v", r)
			}
			if r := w.cordon("", "exec", id, "--", "cat", "/tmp/n"); r.stdout != "1\n" {
				t.Fatalf("/tmp did not persist in the %s session: %v", b, r)
			}
			if n := containersOf(t, b, id); n != 1 {
				t.Fatalf("want the session's one container, got %d", n)
			}
			if r := w.cordon("", "session", "stop", id); r.code != 0 {
				t.Fatalf("stop: %v", r)
			}
			if n := containersOf(t, b, id); n != 0 {
				t.Errorf("%d container(s) left after stop", n)
			}
		})
	}
}

// containersOf counts the engine's containers labelled with run id.
func containersOf(t *testing.T, backend, id string) int {
	t.Helper()
	var cmd *exec.Cmd
	if backend == "docker" {
		cmd = exec.Command("docker", "ps", "-aq", "--filter", "label=cordon.run="+id)
	} else {
		cmd = exec.Command("ctr", "-n", "cordon", "containers", "ls", "-q", fmt.Sprintf("labels.%q==%s", "cordon.run", id))
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return len(strings.Fields(string(out)))
}

func haveCmd(name string) bool {
	_, err := exec.LookPath(name)
	return err == nil
}

func (w *world) gateAdminDir() string { return paths.Root(w.runRoot).Gates() }

// TestSessionCommandCgroups: each command of a session runs in a cgroup of its own, so
// a timeout kills what it started with setsid too, and a monitor alert names the
// command that caused it even while a later command is running.
func TestSessionCommandCgroups(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	w.contract("version: 1\nmonitor: {mode: required, exec: [sh, cat, sleep, setsid, \"true\"]}\n")
	id := w.startSession()
	r := w.cordon("", "exec", id, "--timeout", "1s", "--", "sh", "-c", "setsid sleep 543 & sleep 30")
	if r.code != 124 || !strings.Contains(r.stderr, "killed with everything it started") {
		t.Fatalf("timeout: %v", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(processesMatching("sleep 543")) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := processesMatching("sleep 543"); len(p) > 0 {
		t.Errorf("a setsid child outlived its command's timeout: %v", p)
	}
	// The violating command starts first; a later one is running when it violates.
	early := w.background("exec", id, "--", "sh", "-c", "sleep 1; cat /etc/shadow 2>/dev/null; true")
	time.Sleep(300 * time.Millisecond)
	late := w.cordon("", "exec", id, "--json", "--", "sleep", "2")
	early.wait(t)
	if late.code != 0 {
		t.Fatalf("late exec: %v", late)
	}
	if r := w.cordon("", "session", "stop", id); r.code != 0 {
		t.Fatalf("stop: %v", r)
	}
	cmdOf := map[string]string{} // cmd id -> argv
	var alertCmd string
	for _, rec := range sessionEvents(t, w, id) {
		switch {
		case rec.Type == "cmd.start":
			cmdOf[fmtInt(rec.Seq)] = string(rec.Body)
		case rec.Type == "syscall.alert" && strings.Contains(string(rec.Body), "/etc/shadow"):
			alertCmd = rec.Cmd
		}
	}
	if !strings.Contains(cmdOf[alertCmd], "cat /etc/shadow") {
		t.Errorf("the /etc/shadow alert is joined to command %q (%s), not the one that read it", alertCmd, cmdOf[alertCmd])
	}
}
