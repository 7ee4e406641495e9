package integration

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestMonitorSlotsExhausted (red team, rtmon): with every one of the monitor's 1024
// slots claimed by a live process, a run whose contract requires the monitor is
// refused with exit 125 before its command runs, saying why, and a best-effort run
// says it is unmonitored: no run goes unwatched without a word. The claims are forged
// in the pinned `claims` map (struct claim in monitor/bpf/maps.h), held by this test
// process, which is alive, so no sweep may take them.
func TestMonitorSlotsExhausted(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	root := useBPFRoot(t, w)
	dir := t.TempDir() // the contracts live outside the world's workspace; dir is the runs' workspace
	required := filepath.Join(dir, "required.yaml")
	bestEffort := filepath.Join(dir, "best-effort.yaml")
	mustWrite(t, required, "version: 1\nmonitor: {mode: required, exec: [sh, cat, \"true\"]}\n")
	mustWrite(t, bestEffort, "version: 1\nmonitor: {mode: best-effort, exec: [sh, cat, \"true\"]}\n")
	if r := w.cordon("", "run", "-c", required, "--", "true"); r.code != 0 {
		t.Fatalf("first run: %v", r)
	}
	var set string
	for _, name := range pinsIn(root) {
		if strings.HasPrefix(name, "v-") {
			set = name
		}
	}
	if set == "" {
		t.Fatalf("no program set under %s: %v", root, pinsIn(root))
	}
	claims, err := ebpf.LoadPinnedMap(filepath.Join(root, set, "claims"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer claims.Close()
	if claims.KeySize() != 4 || claims.ValueSize() != 24 {
		t.Fatalf("claims map %d/%d bytes: not the layout this test forges", claims.KeySize(), claims.ValueSize())
	}
	self := owner.Self()
	ns, _ := strconv.ParseUint(self.PIDNS, 10, 32)
	var v [24]byte
	binary.NativeEndian.PutUint64(v[0:], self.Start)
	binary.NativeEndian.PutUint32(v[8:], uint32(self.PID))
	binary.NativeEndian.PutUint32(v[12:], uint32(ns))
	binary.NativeEndian.PutUint64(v[16:], 7)
	var forged []uint32
	t.Cleanup(func() {
		for _, n := range forged {
			claims.Delete(n)
		}
	})
	for n := uint32(0); n < 1024; n++ {
		err := claims.Update(n, v[:], ebpf.UpdateNoExist)
		switch {
		case err == nil:
			forged = append(forged, n)
		case !errors.Is(err, ebpf.ErrKeyExist):
			t.Fatalf("claiming slot %d: %v", n, err)
		}
	}
	ran := filepath.Join(dir, "ran.txt")
	r := w.cordon("", "run", "-c", required, "--", "sh", "-c", "cat /etc/shadow 2>/dev/null; echo ran > ran.txt")
	t.Logf("required, every slot held: %v", r)
	if r.code != 125 {
		t.Errorf("a required-monitor run with every slot held: %v; want exit 125", r)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the refused run's command ran")
	}
	if !strings.Contains(r.stderr, "slots") {
		t.Errorf("the refusal does not say the slots are all held: %q", r.stderr)
	}
	r = w.cordon("", "run", "-c", bestEffort, "--", "sh", "-c", "echo ran > ran.txt")
	t.Logf("best-effort, every slot held: %v", r)
	if r.code != 0 {
		t.Errorf("a best-effort run with every slot held: %v; want it run", r)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("the best-effort run's command did not run: %v", err)
	}
	if !strings.Contains(r.stderr, "slots") {
		t.Errorf("a best-effort run with every slot held does not warn that it is unmonitored and why: %q", r.stderr)
	}
	for _, n := range forged {
		claims.Delete(n)
	}
	forged = nil
	if r := w.cordon("", "run", "-c", required, "--", "true"); r.code != 0 {
		t.Errorf("a run once the slots are free: %v", r)
	}
}

// TestKilledRunsSlotLeavesNothing (red team, rtmon): cordon SIGKILLed while its
// workload floods its ring buffer with opens of /etc/shadow leaves its slot claimed,
// its ring buffer full and its workload perhaps still running; the next run takes
// that slot (the lowest free) and its log holds its own alert, /etc/gshadow, and
// none of the killed run's /etc/shadow.
func TestKilledRunsSlotLeavesNothing(t *testing.T) {
	testutil.RequireRoot(t)
	w := newWorld(t)
	useBPFRoot(t, w)
	dir := t.TempDir() // the contract's directory: the runs' workspace
	contract := filepath.Join(dir, "cordon.yaml")
	mustWrite(t, contract, "version: 1\nmonitor: {mode: required, exec: [sh, cat, \"true\"]}\n")
	marker := "rtmon-killed-" + strconv.Itoa(os.Getpid())
	script := "i=0; while :; do cat /etc/shadow 2>/dev/null; i=$((i+1)); [ $i = 300 ] && echo > started.txt; done; : " + marker
	a := exec.Command(testutil.Cordon(t), "run", "-c", contract, "--", "sh", "-c", script)
	var aout strings.Builder
	a.Dir, a.Env, a.Stdout, a.Stderr = w.ws, w.env, &aout, &aout
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killMarked(marker) })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(dir, "started.txt")); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.Process.Kill()
	a.Wait()
	if _, err := os.Stat(filepath.Join(dir, "started.txt")); err != nil {
		t.Fatalf("the killed run's workload never started: the test proves nothing: %s", aout.String())
	}
	t.Logf("workload processes left after cordon's SIGKILL: %d", len(marked(marker)))
	r := w.cordon("", "run", "-c", contract, "--", "sh", "-c", "cat /etc/gshadow 2>/dev/null; echo done")
	if r.code != 0 {
		t.Fatalf("next run: %v", r)
	}
	own := false
	for _, rec := range lastRun(t, w) {
		body := string(rec.Body)
		if rec.Type != "syscall.alert" {
			continue
		}
		if strings.Contains(body, `"/etc/shadow"`) {
			t.Errorf("the next run's log has the killed run's alert: %s", body)
		}
		own = own || strings.Contains(body, `"/etc/gshadow"`)
	}
	if !own {
		t.Errorf("the next run's own read of /etc/gshadow raised no alert: %v", r)
	}
}

// marked lists the pids of processes whose command line holds marker.
func marked(marker string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(b), marker) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killMarked ends the processes this test started that hold marker, by pid.
func killMarked(marker string) {
	for _, pid := range marked(marker) {
		_ = linux.Kill(pid, syscall.SIGKILL)
	}
}
