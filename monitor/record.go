package monitor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Record is one event as the BPF programs sent it, decoded but not yet interpreted.
type Record struct {
	Cgroup  uint64
	Args    [6]uint64 // per syscall: fill (bpf/filter.h), on_other (bpf/monitor.c)
	PID     uint32
	TID     uint32
	PPID    uint32
	UID     uint32
	Syscall Syscall
	Flags   uint16 // flag* below
	Comm    string
	Ticket  uint64 // the ticket of the run the programs sent it for (monitorRun.Ticket)
	// Run is the cgroup id of the run the programs matched the task to, from the task's
	// own cgroups (never from the run's entry in runs, whose memory the kernel may give
	// to the next run's entry while a program still reads it).
	Run uint64
	Str [3][]byte // up to three strings, aliasing the sample (valid until the next read)
}

// Record flags (enum ef in bpf/maps.h).
const (
	flagTrunc    = 1 // a string or path was cut
	flagFault    = 2 // a string could not be read
	flagRelative = 4 // open: Str[1] is the directory a relative Str[0] is resolved in
	// flagUnwatched: a string could not be read at entry and the table of calls to read
	// again at exit was full (it is shared by every run on the host).
	flagUnwatched = 8
)

// Layout of struct event (bpf/maps.h); TestRecordLayout checks it against the
// generated monitorEvent.
const (
	offArgs   = 8
	offPID    = 56
	offSC     = 72
	offFlags  = 74
	offLen    = 76
	offComm   = 84
	offTicket = 104
	offRun    = 112
	headerLen = 120
)

var errShort = errors.New("record shorter than its header")

// decodeRecord decodes one ring buffer sample. It never panics on malformed input.
func decodeRecord(b []byte) (Record, error) {
	if len(b) < headerLen {
		return Record{}, errShort
	}
	le := binary.NativeEndian
	r := Record{
		Cgroup:  le.Uint64(b),
		PID:     le.Uint32(b[offPID:]),
		TID:     le.Uint32(b[offPID+4:]),
		PPID:    le.Uint32(b[offPID+8:]),
		UID:     le.Uint32(b[offPID+12:]),
		Syscall: Syscall(le.Uint16(b[offSC:])),
		Flags:   le.Uint16(b[offFlags:]),
		Ticket:  le.Uint64(b[offTicket:]),
		Run:     le.Uint64(b[offRun:]),
	}
	for i := range r.Args {
		r.Args[i] = le.Uint64(b[offArgs+8*i:])
	}
	comm := b[offComm : offComm+16]
	if i := bytes.IndexByte(comm, 0); i >= 0 {
		comm = comm[:i]
	}
	r.Comm = string(comm)
	data := b[headerLen:]
	off := 0
	for i := range r.Str {
		n := int(le.Uint16(b[offLen+2*i:]))
		if off+n > len(data) {
			return Record{}, fmt.Errorf("string %d of %d bytes at %d overruns a %d-byte record", i, n, off, len(b))
		}
		r.Str[i] = data[off : off+n : off+n]
		off += n
	}
	return r, nil
}

// Syscall identifies a watched syscall (enum sc in bpf/monitor.c).
type Syscall uint16

// Watched syscalls, in the order of enum sc.
const (
	SysExecve Syscall = iota + 1
	SysExecveat
	SysOpen
	SysOpenat
	SysOpenat2
	SysCreat
	SysConnect
	SysPtrace
	SysMount
	SysUmount
	SysFsopen
	SysFsmount
	SysMoveMount
	SysOpenTree
	SysPivotRoot
	SysUnshare
	SysSetns
	SysBPF
	SysInitModule
	SysFinitModule
	SysKexecLoad
	SysKexecFileLoad
	SysKeyctl
	SysAddKey
	SysRequestKey
	SysOpenByHandleAt
	sysMax
)

var syscallNames = [...]string{
	SysExecve: "execve", SysExecveat: "execveat", SysOpen: "open", SysOpenat: "openat",
	SysOpenat2: "openat2", SysCreat: "creat", SysConnect: "connect", SysPtrace: "ptrace",
	SysMount: "mount", SysUmount: "umount2", SysFsopen: "fsopen", SysFsmount: "fsmount",
	SysMoveMount: "move_mount", SysOpenTree: "open_tree", SysPivotRoot: "pivot_root",
	SysUnshare: "unshare", SysSetns: "setns", SysBPF: "bpf", SysInitModule: "init_module",
	SysFinitModule: "finit_module", SysKexecLoad: "kexec_load",
	SysKexecFileLoad: "kexec_file_load", SysKeyctl: "keyctl", SysAddKey: "add_key",
	SysRequestKey: "request_key", SysOpenByHandleAt: "open_by_handle_at",
}

func (s Syscall) String() string {
	if s > 0 && s < sysMax {
		return syscallNames[s]
	}
	return fmt.Sprintf("syscall(%d)", uint16(s))
}

// isOpen reports whether s opens a file by path.
func (s Syscall) isOpen() bool {
	return s == SysOpen || s == SysOpenat || s == SysOpenat2 || s == SysCreat
}

// isExec reports whether s replaced the process's program.
func (s Syscall) isExec() bool { return s == SysExecve || s == SysExecveat }
