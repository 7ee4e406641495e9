package tally

import (
	"fmt"
	"testing"

	"github.com/cordonhq/cordon/internal/event"
)

func TestAlertCountsByKindBounded(t *testing.T) {
	var c alertCounts
	shadow := event.SyscallAlertBody{Syscall: "openat", Path: "/etc/shadow", Category: "read of a hidden path", Reason: "read of a hidden path (/etc/shadow: secret why)"}
	c.add("1", shadow)
	c.add("1", shadow)
	c.add("2", event.SyscallAlertBody{Syscall: "connect", Addr: "1.2.3.4:443", Rule: "connect"})
	if got := c.list("1"); len(got) != 1 || got[0] != (Alert{Category: "read of a hidden path", Target: "/etc/shadow", Syscall: "openat", Count: 2}) {
		t.Errorf("command 1: %+v", got)
	}
	if got := c.list("2"); len(got) != 1 || got[0].Category != "connect" || got[0].Target != "1.2.3.4:443" {
		t.Errorf("command 2 (no category: the rule stands in): %+v", got)
	}
	if got := c.list(""); len(got) != 2 {
		t.Errorf("run: %+v", got)
	}
	c.forget("1")
	if got := c.list("1"); got != nil {
		t.Errorf("forgotten command still listed: %+v", got)
	}
	for i := range maxAlertKinds + 10 {
		c.add("3", event.SyscallAlertBody{Syscall: "openat", Path: fmt.Sprint("/x/", i), Category: "c"})
	}
	got := c.list("3")
	if len(got) != maxAlertKinds+1 || got[maxAlertKinds].Count != 10 || got[maxAlertKinds].Category != "more alerts (see the audit log)" {
		t.Errorf("overflow: %d kinds, last %+v", len(got), got[len(got)-1])
	}
}
