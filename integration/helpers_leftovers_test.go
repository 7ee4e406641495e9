package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/internal/testutil"
)

// leftover is an engine object or run directory of a container run, with its
// cordon.owner label (PID:START:PIDNS).
type leftover struct{ what, owner string }

func (l leftover) String() string { return l.what }

// pid is the owner's pid, or 0.
func (l leftover) pid() int {
	n, _ := strconv.Atoi(strings.Split(l.owner, ":")[0])
	return n
}

// foreign reports whether l belongs to a run that another process is still running
// (another test run on this machine): its owner lives and is not a child of this test.
func (l leftover) foreign() bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(l.pid()) + "/stat")
	if l.pid() == 0 || err != nil {
		return false
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 1 && f[1] != strconv.Itoa(os.Getpid())
}

// leftovers lists what the backend holds of cordon's runs (containers, tasks and
// snapshots labelled by cordon), and the container run directories.
func leftovers(t *testing.T, backend string) []leftover {
	t.Helper()
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		return string(out)
	}
	labels := func(kind, name string) map[string]string {
		var info struct{ Labels map[string]string }
		// Removed since it was listed (another cordon's gc or teardown): no labels.
		out, _ := exec.Command("ctr", "-n", "cordon", kind, "info", name).Output()
		_ = json.Unmarshal(out, &info)
		return info.Labels
	}
	var out []leftover
	switch backend {
	case "docker":
		for _, line := range strings.Split(strings.TrimSpace(run("docker", "ps", "-a", "--filter", "label=cordon.run", "--format", `{{.Names}} {{.Label "cordon.owner"}}`)), "\n") {
			if name, owner, ok := strings.Cut(line, " "); ok {
				out = append(out, leftover{"container:" + name, owner})
			}
		}
	case "containerd":
		owners := map[string]string{}
		for _, c := range strings.Fields(run("ctr", "-n", "cordon", "containers", "ls", "-q", `labels."cordon.run"`)) {
			owners[c] = labels("containers", c)["cordon.owner"]
			out = append(out, leftover{"container:" + c, owners[c]})
		}
		for _, tk := range strings.Fields(run("ctr", "-n", "cordon", "tasks", "ls", "-q")) {
			out = append(out, leftover{"task:" + tk, owners[tk]})
		}
		for _, s := range strings.Fields(run("ctr", "-n", "cordon", "snapshots", "ls")) {
			if strings.HasPrefix(s, "cordon-") {
				out = append(out, leftover{"snapshot:" + s, labels("snapshots", s)["cordon.owner"]})
			}
		}
	default:
		t.Fatalf("unknown backend %s", backend)
	}
	for _, root := range runRoots() {
		entries, _ := os.ReadDir(root)
		for _, e := range entries {
			dir := filepath.Join(root, e.Name())
			if _, err := os.Stat(filepath.Join(dir, "init")); err != nil {
				continue // not a container run's
			}
			var o struct{ PID int }
			data, _ := os.ReadFile(filepath.Join(dir, "owner.json"))
			_ = json.Unmarshal(data, &o)
			out = append(out, leftover{"run directory:" + e.Name(), strconv.Itoa(o.PID)})
		}
	}
	return out
}

// assertNoLeftovers fails when anything of this test's container runs remains. What
// runs of another process on this machine hold is not this test's; what a killed
// run of another process left is removed by its gc, so the check waits a little.
func assertNoLeftovers(t *testing.T, backend string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var mine []leftover
		for _, l := range leftovers(t, backend) {
			if !l.foreign() {
				mine = append(mine, l)
			}
		}
		if len(mine) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %v left behind after the runs; nothing may be", backend, mine)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// uniq makes a sleep duration (a process marker) that no other test process on this
// machine uses.
func uniq(n string) string { return n + strconv.Itoa(os.Getpid()) }

// startSleeper starts `cordon run` with a daemonised sleeper and returns once both
// sleeps run.
func startSleeper(t *testing.T, w *world, n string) (*exec.Cmd, string) {
	t.Helper()
	marker := "sleep " + n
	cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", "setsid "+marker+" & "+marker)
	cmd.Dir, cmd.Env = w.ws, w.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Both sleeps themselves: cordon and the shell name the marker in their arguments
	// too, and counting them raced the shell's exec.
	deadline := time.Now().Add(15 * time.Second)
	for len(processesRunning(marker)) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(processesRunning(marker)) < 2 {
		t.Fatalf("%q did not start", marker)
	}
	return cmd, marker
}

// killCordon kill -9s a running cordon and checks what it leaves: the sandbox's
// processes die at once (pid1 sees cordon's end of its status pipe close), while the
// engine's labelled object stays for gc. It returns the run id.
func killCordon(t *testing.T, w *world, backend, n string) string {
	t.Helper()
	cmd, marker := startSleeper(t, w, n)
	name := ""
	for _, l := range leftovers(t, backend) {
		if c, ok := strings.CutPrefix(l.what, "container:"); ok && l.pid() == cmd.Process.Pid {
			name = c
		}
	}
	if name == "" {
		t.Fatalf("no container labelled with cordon (pid %d) as its owner while the run goes on", cmd.Process.Pid)
	}
	runID := labelOf(t, backend, name, "cordon.run")
	if d := labelOf(t, backend, name, "cordon.contract"); !strings.HasPrefix(d, "sha256:") {
		t.Errorf("label cordon.contract: got %q", d)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for len(processesMatching(marker)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if p := processesMatching(marker); len(p) > 0 {
		t.Fatalf("%q still running after kill -9 of cordon: %v", marker, p)
	}
	return runID
}

// fifoDirs counts containerd's stdio FIFO directories (one per task a client made).
func fifoDirs() int {
	entries, _ := os.ReadDir("/run/containerd/fifo")
	return len(entries)
}

func labelOf(t *testing.T, backend, name, label string) string {
	t.Helper()
	var out []byte
	var err error
	if backend == "docker" {
		out, err = exec.Command("docker", "inspect", "--format", `{{index .Config.Labels "`+label+`"}}`, name).Output()
	} else {
		out, err = exec.Command("ctr", "-n", "cordon", "containers", "info", name).Output()
		if m := regexp.MustCompile(`"` + regexp.QuoteMeta(label) + `": "([^"]*)"`).FindSubmatch(out); m != nil {
			out = m[1]
		}
	}
	if err != nil {
		t.Fatalf("reading label %s of %s: %v", label, name, err)
	}
	return strings.TrimSpace(string(out))
}
