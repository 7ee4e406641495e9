package linux

import (
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A launcher's child that left its process group (setsid, as bwrap's does) and has no
// parent-death signal is killed with the launcher, not orphaned.
func TestKillLauncherTakesItsChildren(t *testing.T) {
	cmd := exec.Command("sh", "-c", "setsid sleep 300 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	child, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("child pid %q: %v", buf[:n], err)
	}
	// The child has left sh's group once it runs sleep.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if f := procStat(child); len(f) > 2 && f[2] != strconv.Itoa(cmd.Process.Pid) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never left the launcher's process group")
		}
	}
	if err := KillLauncher(cmd.Process, time.Second); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for deadline := time.Now().Add(5 * time.Second); procState(child) != 0 && procState(child) != 'Z'; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			_ = Kill(child, syscall.SIGKILL)
			t.Fatalf("the launcher's child %d outlived it", child)
		}
	}
	// Done: a launcher already reaped is left alone.
	if err := KillLauncher(cmd.Process, time.Second); err != nil {
		t.Fatalf("killing a reaped launcher: %v", err)
	}
}
