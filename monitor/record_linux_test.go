package monitor

import (
	"testing"
	"unsafe"
)

// TestRecordLayout: the decoder's offsets are those of the C struct, as bpf2go saw it.
func TestRecordLayout(t *testing.T) {
	var e monitorEvent
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"args", offArgs, unsafe.Offsetof(e.Args)},
		{"pid", offPID, unsafe.Offsetof(e.Pid)},
		{"sc", offSC, unsafe.Offsetof(e.Sc)},
		{"flags", offFlags, unsafe.Offsetof(e.Flags)},
		{"len", offLen, unsafe.Offsetof(e.Len)},
		{"comm", offComm, unsafe.Offsetof(e.Comm)},
		{"ticket", offTicket, unsafe.Offsetof(e.Ticket)},
		{"run", offRun, unsafe.Offsetof(e.Run)},
		{"data", headerLen, unsafe.Offsetof(e.Data)},
	} {
		if c.got != c.want {
			t.Errorf("offset of %s = %d; the C struct has %d", c.name, c.got, c.want)
		}
	}
	if int(monitorScSC_MAX) != int(sysMax) || int(monitorScSC_OPEN_BY_HANDLE_AT) != int(SysOpenByHandleAt) {
		t.Errorf("enum sc and Syscall disagree")
	}
}
