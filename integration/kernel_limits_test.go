package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/testutil"
)

func TestLimitsEnforced(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	w.contract("version: 1\nlimits: {memory: 64MiB, pids: 20}\n")
	r := w.sh("for i in $(seq 40); do sleep 5 & done; echo spawned")
	assertContains(t, "stderr", r.stderr, "fork")
	r = w.sh("x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived ${#x}")
	if r.code != 137 || strings.Contains(r.stdout, "survived") {
		t.Fatalf("want the memory limit to kill the command (137), got %v", r)
	}
	assertContains(t, "stderr", r.stderr, "the memory limit (limits.memory")
}

// TestDefaultLimitsBoundTheRun (bwrap): a contract that sets no limits still gets the
// default pids and memory limits, and every private tmpfs is sized to the memory limit.
// A fork bomb under the default contract stops at the pids limit while a second run and
// the host go on; filling /dev/shm stops at the memory limit (a small one: see
// fillShmStopsAtTheMemoryLimit).
func TestDefaultLimitsBoundTheRun(t *testing.T) {
	testutil.RequireRoot(t)
	defaultLimitsBoundTheRun(t, true)
}

// TestContainerDefaultLimits: the same on docker and containerd, but for the fork bomb:
// the default pids limit is read from the container's cgroup on the host (the kernel
// holds the container to it), and the bomb itself runs on bwrap only. Forking 4096
// processes takes this 2-core test machine a minute or more per backend.
func TestContainerDefaultLimits(t *testing.T) {
	forEachContainerBackend(t, func(t *testing.T, _ string) { defaultLimitsBoundTheRun(t, false) })
}

func defaultLimitsBoundTheRun(t *testing.T, forkBomb bool) {
	w := newWorld(t)
	// No limits: only the defaults. Forking thousands of processes is slow on a busy
	// machine, so the command gets time enough.
	w.contract("version: 1\ncommands: {timeout: 10m}\n")
	// The fork bomb forks without exec (a subshell blocked opening a FIFO), counting
	// each fork in a workspace file, until fork fails; then it blocks on a second FIFO
	// so that it holds every process it got while the test looks.
	// It writes its count every 64 forks only: a write per fork doubled its time.
	script := `cat /proc/self/cgroup; df -k /tmp /dev/shm
mkfifo /tmp/f /tmp/hold; echo ready
( n=0; while :; do ( read x < /tmp/f ) & n=$((n+1)); [ $((n % 64)) = 0 ] && echo $n > forks; done ) 2>/dev/null
echo saturated; read x < /tmp/hold`
	if !forkBomb {
		script = "cat /proc/self/cgroup; df -k /tmp /dev/shm; mkfifo /tmp/hold; echo ready; read x < /tmp/hold"
	}
	bomb := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", script)
	bomb.Dir, bomb.Env = w.ws, w.env
	stdout, err := bomb.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := bomb.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = bomb.Process.Signal(syscall.SIGTERM); _ = bomb.Wait() }()
	cgroups, sizes, sc := map[string]string{}, map[string]int64{}, bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "ready" {
		if f := strings.SplitN(sc.Text(), ":", 3); len(f) == 3 {
			for _, c := range strings.Split(f[1], ",") {
				cgroups[c] = f[2]
			}
		} else if f := strings.Fields(sc.Text()); len(f) == 6 && (f[5] == "/tmp" || f[5] == "/dev/shm") {
			kib, _ := strconv.ParseInt(f[1], 10, 64)
			sizes[f[5]] = kib
		}
	}
	// /tmp is sized to the memory limit; /dev/shm too on bwrap, and the engines' own
	// /dev/shm (64 MiB) is smaller still.
	wantKiB := contract.DefaultMemory >> 10
	if sizes["/tmp"] != wantKiB || sizes["/dev/shm"] == 0 || sizes["/dev/shm"] > wantKiB {
		t.Errorf("private tmpfs sizes: got %v KiB, want /tmp of %d KiB and /dev/shm of at most that", sizes, wantKiB)
	}
	// The limits are the cgroup's, read from the host (v1 controllers on a hybrid
	// host; a container's path as its engine named it).
	bwrap := os.Getenv("CORDON_BACKEND") == "" || os.Getenv("CORDON_BACKEND") == "bwrap"
	for file, v := range map[string]int64{"memory/memory.limit_in_bytes": contract.DefaultMemory, "pids/pids.max": contract.DefaultPids} {
		ctrl := strings.Split(file, "/")[0]
		p := cgroups[ctrl]
		if bwrap {
			// bwrap starts in the run's v1 cgroups (its forking thread joined them), so
			// the cgroup namespace it makes is rooted there: the sandbox sees "/" and
			// nothing of the host's hierarchy. The host finds the cgroup as bwrap's.
			if p != "/" {
				t.Errorf("the sandbox sees its %s cgroup as %q, want / (its cgroup namespace rooted at the run's cgroup)", ctrl, p)
			}
			p = bwrapCgroup(t, bomb.Process.Pid, ctrl)
		}
		got, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, p, filepath.Base(file)))
		if err != nil || strings.TrimSpace(string(got)) != strconv.FormatInt(v, 10) {
			t.Errorf("%s: got %q (%v), want %d", file, got, err, v)
		}
	}
	if forkBomb {
		forkBombStopsAtTheDefault(t, bomb, sc)
	}
	_ = bomb.Process.Signal(syscall.SIGTERM)
	_ = bomb.Wait()
	fillShmStopsAtTheMemoryLimit(t, w)
}

// bwrapCgroup is, as the host sees it, the ctrl cgroup of the bwrap that the cordon
// process pid started.
func bwrapCgroup(t *testing.T, pid int, ctrl string) string {
	t.Helper()
	for _, d := range descendants(pid) {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", d)); strings.TrimSpace(string(comm)) != "bwrap" {
			continue
		}
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", d))
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.SplitN(line, ":", 3); len(f) == 3 && slices.Contains(strings.Split(f[1], ","), ctrl) {
				return f[2]
			}
		}
	}
	t.Fatalf("no bwrap below cordon (pid %d) with a %s cgroup", pid, ctrl)
	return ""
}

// forkBombStopsAtTheDefault waits for the fork bomb's forks to fail, checks how many it
// got and that a second run and the host go on beside it.
func forkBombStopsAtTheDefault(t *testing.T, bomb *exec.Cmd, sc *bufio.Scanner) {
	saturated := make(chan bool, 1)
	go func() {
		for sc.Scan() {
			if sc.Text() == "saturated" {
				saturated <- true
			}
		}
		close(saturated)
	}()
	select {
	case ok := <-saturated:
		if !ok {
			t.Fatalf("the fork bomb's run ended before its forks failed (exit %v)", bomb.Wait())
		}
	case <-time.After(8 * time.Minute):
		t.Fatal("the fork bomb never stopped at the pids limit")
	}
	data, _ := os.ReadFile(filepath.Join(bomb.Dir, "forks"))
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if n < contract.DefaultPids/2 || n > contract.DefaultPids {
		t.Errorf("the fork bomb made %d processes; want it stopped at the default pids limit (%d)", n, contract.DefaultPids)
	}
	// While it holds all it got, another run and the host go on.
	other := newWorld(t)
	if r := other.sh("echo other run"); r.code != 0 || !strings.Contains(r.stdout, "other run") {
		t.Fatalf("a second run beside the fork bomb failed: %v", r)
	}
	if out, err := exec.Command("sh", "-c", "echo host").Output(); err != nil || string(out) != "host\n" {
		t.Fatalf("the host could not fork beside the fork bomb: %v", err)
	}
}

// fillShmStopsAtTheMemoryLimit: filling /dev/shm (a tmpfs of its own, not bwrap's
// /dev) stops at the memory limit: the tmpfs is full, or the memory limit kills the
// writer. It fills under a 128MiB limit, not the 4GiB default: tmpfs pages are real
// memory, and filling 4GiB took a CI machine's RAM (the job was OOM-killed, exit
// 137). The default's tmpfs is shown sized to the default limit by df above; this
// shows the size holds.
func fillShmStopsAtTheMemoryLimit(t *testing.T, w *world) {
	const limit = 128 << 20
	w.contract("version: 1\nlimits: {memory: 128MiB}\n")
	r := w.sh("dd if=/dev/zero of=/dev/shm/fill bs=1M count=" + strconv.Itoa(limit>>20+64) + " 2>&1; echo dd=$?")
	switch {
	case r.code == 137:
		assertContains(t, "stderr", r.stderr, "the memory limit (limits.memory")
	case r.code == 0 && strings.Contains(r.stdout, "No space left") && strings.Contains(r.stdout, "dd=1"):
	default:
		t.Fatalf("filling /dev/shm: want it stopped at %d bytes, got %v", limit, r)
	}
}

func TestContainerLimits(t *testing.T) {
	image := requireEngines(t)
	forEachContainerBackend(t, func(t *testing.T, backend string) {
		w := newWorld(t)
		w.imageContract(image, "limits: {memory: 64MiB, pids: 30, cpu: 0.5}\n")
		cmd := exec.Command(testutil.Cordon(t), "run", "--", "sh", "-c", "cat /proc/self/cgroup; echo ready; sleep 302")
		cmd.Dir, cmd.Env = w.ws, w.env
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
		cgroups := map[string]string{}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() && sc.Text() != "ready" {
			// hierarchy-id:controllers:path
			if f := strings.SplitN(sc.Text(), ":", 3); len(f) == 3 {
				for _, c := range strings.Split(f[1], ",") {
					cgroups[c] = f[2]
				}
			}
		}
		want := map[string]string{
			"memory/memory.limit_in_bytes": strconv.Itoa(64 << 20),
			"pids/pids.max":                "30",
			"cpu/cpu.cfs_quota_us":         "50000",
		}
		for file, v := range want {
			ctrl := strings.Split(file, "/")[0]
			got, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", ctrl, cgroups[ctrl], filepath.Base(file)))
			if err != nil || strings.TrimSpace(string(got)) != v {
				t.Errorf("%s: got %q (%v); want %s", file, got, err, v)
			}
		}
	})
}
