package monitor

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// highSignal says, for each syscall that is a deviation whenever the workload makes it,
// what it is used for. An array, so that it is data in the binary rather than a map
// built when cordon starts.
var highSignal = [sysMax]string{
	SysPtrace:         "tracing or injecting into another process",
	SysMount:          "changing the mount tree",
	SysUmount:         "changing the mount tree",
	SysFsopen:         "changing the mount tree",
	SysFsmount:        "changing the mount tree",
	SysMoveMount:      "changing the mount tree",
	SysOpenTree:       "changing the mount tree",
	SysPivotRoot:      "changing the root file system",
	SysUnshare:        "creating namespaces",
	SysSetns:          "entering another namespace",
	SysBPF:            "loading BPF programs",
	SysInitModule:     "loading a kernel module",
	SysFinitModule:    "loading a kernel module",
	SysKexecLoad:      "replacing the kernel",
	SysKexecFileLoad:  "replacing the kernel",
	SysKeyctl:         "kernel keyring access",
	SysAddKey:         "kernel keyring access",
	SysRequestKey:     "kernel keyring access",
	SysOpenByHandleAt: "opening files by handle, around the mount tree",
}

// Linux address families.
const (
	afUnspec = 0
	afUnix   = 1
	afInet   = 2
	afInet6  = 10
)

// sockaddrString formats a raw sockaddr as "IP:PORT", "[IP6]:PORT", "unix:/path" or
// "unix:@abstract". ok is false for AF_UNSPEC (connect to dissolve an association),
// which goes nowhere.
func sockaddrString(b []byte) (s string, ok bool) {
	if len(b) < 2 {
		return "malformed sockaddr", true
	}
	family := binary.NativeEndian.Uint16(b)
	switch {
	case family == afUnspec:
		return "", false
	case family == afInet && len(b) >= 8:
		ip := netip.AddrFrom4([4]byte(b[4:8]))
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String(), true
	case family == afInet6 && len(b) >= 24:
		ip := netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		return netip.AddrPortFrom(ip, binary.BigEndian.Uint16(b[2:4])).String(), true
	case family == afUnix:
		p := b[2:]
		if len(p) > 0 && p[0] == 0 {
			return "unix:@" + strings.TrimRight(string(p[1:]), "\x00"), true
		}
		if i := strings.IndexByte(string(p), 0); i >= 0 {
			p = p[:i]
		}
		return "unix:" + string(p), true
	}
	return fmt.Sprintf("address family %d", family), true
}

// detail describes the arguments of a high-signal syscall.
func detail(r *Record) string {
	s := func(i int) string { return fmt.Sprintf("%q", r.Str[i]) }
	a := r.Args
	switch r.Syscall {
	case SysPtrace:
		return fmt.Sprintf("request=%s pid=%d", ptraceRequest(a[0]), int32(a[1]))
	case SysMount:
		return fmt.Sprintf("source=%s target=%s fstype=%s flags=%#x", s(0), s(1), s(2), a[3])
	case SysUmount:
		return fmt.Sprintf("target=%s flags=%#x", s(0), a[1])
	case SysMoveMount:
		return fmt.Sprintf("from=%s to=%s", s(0), s(1))
	case SysOpenTree, SysFsopen:
		return fmt.Sprintf("path=%s", s(0))
	case SysPivotRoot:
		return fmt.Sprintf("new_root=%s put_old=%s", s(0), s(1))
	case SysUnshare:
		return "flags=" + cloneFlags(a[0])
	case SysSetns:
		return fmt.Sprintf("fd=%d nstype=%s", int32(a[0]), cloneFlags(a[1]))
	case SysBPF:
		return fmt.Sprintf("cmd=%d", a[0])
	case SysKeyctl:
		return fmt.Sprintf("operation=%d", a[0])
	case SysAddKey, SysRequestKey:
		return fmt.Sprintf("type=%s description=%s", s(0), s(1))
	case SysInitModule, SysFinitModule:
		return fmt.Sprintf("params=%s", s(0))
	}
	return fmt.Sprintf("args=%#x", a[:3])
}

func ptraceRequest(req uint64) string {
	names := map[uint64]string{0: "TRACEME", 1: "PEEKTEXT", 2: "PEEKDATA", 4: "POKETEXT",
		5: "POKEDATA", 16: "ATTACH", 17: "DETACH", 0x4206: "SEIZE"}
	if n, ok := names[req]; ok {
		return "PTRACE_" + n
	}
	return fmt.Sprint(req)
}

func cloneFlags(f uint64) string {
	names := []struct {
		bit  uint64
		name string
	}{{0x00020000, "NEWNS"}, {0x02000000, "NEWCGROUP"}, {0x04000000, "NEWUTS"},
		{0x08000000, "NEWIPC"}, {0x10000000, "NEWUSER"}, {0x20000000, "NEWPID"},
		{0x40000000, "NEWNET"}, {0x00000080, "NEWTIME"}}
	var out []string
	for _, n := range names {
		if f&n.bit != 0 {
			out = append(out, "CLONE_"+n.name)
			f &^= n.bit
		}
	}
	if f != 0 || len(out) == 0 {
		out = append(out, fmt.Sprintf("%#x", f))
	}
	return strings.Join(out, "|")
}
