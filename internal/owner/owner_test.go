package owner

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
)

func TestSelfIsAliveAndAnEndedProcessIsNot(t *testing.T) {
	me := Self()
	if me.PID != os.Getpid() || !me.Alive() {
		t.Fatalf("Self() = %+v, alive %v", me, me.Alive())
	}
	if runtime.GOOS == "linux" && (me.Start == 0 || me.PIDNS == "") {
		t.Fatalf("Self() = %+v: no start time or pid namespace on Linux", me)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := Process{PID: cmd.Process.Pid, Start: me.Start, PIDNS: me.PIDNS}
	if gone.Alive() {
		t.Errorf("%+v: an exited, reaped process counts as alive", gone)
	}
	if (Process{PID: cmd.Process.Pid}).Alive() {
		t.Errorf("an exited process recorded without a start time counts as alive")
	}
	reused := me
	reused.Start++
	if runtime.GOOS == "linux" && reused.Alive() {
		t.Errorf("%+v: a reused pid (other start time) counts as alive", reused)
	}
	other := gone
	other.PIDNS = "1"
	if !aliveElsewhere(other, false) {
		t.Errorf("an owner in another pid namespace, not found by a process that does not see every process, must count as alive")
	}
	if (Process{}).Alive() {
		t.Errorf("the zero Process counts as alive")
	}
}

func TestLabelRoundTrip(t *testing.T) {
	me := Self()
	p, ok := ParseLabel(me.Label())
	if !ok || p != me {
		t.Fatalf("ParseLabel(%q) = %+v, %v", me.Label(), p, ok)
	}
	for _, bad := range []string{"", "1:2", "x:1:2", "0:1:2", "1:y:2", "-3:1:2", "1:2:3:4"} {
		if _, ok := ParseLabel(bad); ok {
			t.Errorf("ParseLabel(%q) accepted", bad)
		}
	}
}
