package monitor

import (
	"bytes"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// fileID identifies a file by device (as stat(2) reports it) and inode.
type fileID struct{ Dev, Ino uint64 }

// checker compares records with a profile. It is pure: everything it knows of the host
// (which files are risky executables, by identity) is given to it.
type checker struct {
	prof Profile
	// risky maps the identity of each shell, interpreter and relay found on the host
	// to its names, so that a copy made by hard link or a symlink is still known.
	risky map[fileID][]string
}

// Linux open(2) flags (generic values, as on x86-64 and arm64).
const (
	oAccMode = 0o3
	oCreat   = 0o100
	oTrunc   = 0o1000
	oTmpfile = 0o20000000
	oPath    = 0o10000000 // a handle to the name only: no content is read or written

	resolveInRoot = 0x10 // openat2 RESOLVE_IN_ROOT: Args[3] of an open is open_how.resolve
)

// check returns the alert for a record, if it is a deviation; unresolved is true when
// the record could not be compared (a path that could not be read or resolved).
func (c *checker) check(r *Record) (a Alert, deviates, unresolved bool) {
	a = Alert{
		PID: int(r.PID), PPID: int(r.PPID), UID: int(r.UID), Comm: r.Comm,
		Cgroup: r.Cgroup, Syscall: r.Syscall.String(), Action: ActionAlert,
	}
	switch {
	case r.Syscall.isOpen():
		return c.checkOpen(r, a)
	case r.Syscall.isExec():
		return c.checkExec(r, a)
	case r.Syscall == SysConnect:
		return c.checkConnect(r, a)
	case r.Syscall > 0 && r.Syscall < sysMax:
		a.Rule, a.Category, a.Detail = RuleSyscall, CatSyscall, detail(r)
		a.Reason = "high-signal syscall: " + highSignal[r.Syscall]
		return a, true, false
	}
	return a, false, true
}

// unwatched is the alert for an open or connect the monitor could not read at all: a
// workload that fills the shared table of pending calls must not make its own calls,
// or another run's, go unreported.
func unwatched(a Alert) (Alert, bool, bool) {
	a.Rule, a.Category = RuleSyscall, CatUnwatched
	a.Reason = "its arguments could not be read: the monitor's table of pending calls was full"
	return a, true, false
}

// faulted is the alert for an open or connect whose arguments could be read neither at
// syscall entry nor again at its exit (bpf/monitor.c, tp_exit). By the exit the kernel
// has read them itself (a call it failed with EFAULT is dropped there): what faults is
// memory the workload dropped meanwhile (MADV_DONTNEED from another thread). It is
// reported: else a workload retrying that race opens or connects where it likes,
// counted only as unresolved.
func faulted(a Alert, p string) (Alert, bool, bool) {
	a.Path = p
	a.Rule, a.Category = RuleSyscall, CatUnwatched
	a.Reason = "its arguments could not be read, at entry nor at exit: memory dropped after the kernel read it"
	return a, true, false
}

func (c *checker) checkOpen(r *Record, a Alert) (Alert, bool, bool) {
	if r.Flags&flagUnwatched != 0 {
		return unwatched(a)
	}
	p := string(r.Str[0])
	if r.Flags&flagFault != 0 {
		// the path, or the flags of openat2 (struct open_how): either may be a write
		return faulted(a, p)
	}
	if r.Flags&flagTrunc != 0 {
		// What was cut may have left the prefix it shows ("/usr/aaa…/../../etc"):
		// a path not read in full is never taken as allowed.
		a.Path = p
		a.Rule, a.Category = RuleRead, CatUnwatched
		a.Reason = "its path is longer than the monitor reads (4096 bytes or 48 components)"
		return a, true, false
	}
	switch {
	case r.Syscall == SysOpenat2 && r.Args[3]&resolveInRoot != 0:
		// below the directory, as if it were the root: ".." stops there, and an
		// absolute path is below it too
		if r.Flags&flagRelative == 0 || len(r.Str[1]) == 0 {
			return a, false, true
		}
		p = string(r.Str[1]) + filepath.Clean("/"+p)
	case !strings.HasPrefix(p, "/"):
		if r.Flags&flagRelative == 0 || len(r.Str[1]) == 0 {
			return a, false, true
		}
		p = string(r.Str[1]) + "/" + p
	}
	flags := r.Args[0]
	if flags&oPath != 0 && flags&oTmpfile != oTmpfile {
		// O_PATH reads and writes nothing (Landlock rules and fstat take such
		// handles); whatever is later opened through one is an open of its own.
		return a, false, true
	}
	write := flags&oAccMode != 0 || flags&(oCreat|oTrunc|oTmpfile) != 0
	a.Path = c.prof.resolve(p)
	a.Access = "read"
	if write {
		a.Access = "write"
	}
	if unfollowable(a.Path) {
		a.Rule, a.Category = RuleRead, CatUnfollowable
		if write {
			a.Rule = RuleWrite
		}
		a.Reason = CatUnfollowable + ": below a process's working directory or descriptor, whose path it does not know"
		return a, true, false
	}
	a.Rule, a.Category, a.Reason = c.prof.checkPath(a.Path, write)
	return a, a.Rule != "", false
}

func (c *checker) checkExec(r *Record, a Alert) (Alert, bool, bool) {
	filename := string(r.Str[0])
	resolved := string(r.Str[2])
	a.Argv = splitArgv(r.Str[1])
	a.Path = resolved
	if a.Path == "" {
		a.Path = filename
	}
	if r.Args[2] == 0 && resolved != "" {
		a.Rule, a.Category = RuleExec, CatExecNameless
		a.Reason = "exec of a file with no name (a memfd or a deleted file)"
		return a, true, false
	}
	// The names of the file that runs: its own, and those the host knows it by.
	names := []string{path.Base(resolved)}
	names = append(names, c.risky[fileID{Dev: devFromKernel(r.Args[1]), Ino: r.Args[0]}]...)
	// The name it was run by tells what it is too (a link "ls" to dash is a shell), but
	// allows it only where the workload cannot have made that link, or as another
	// version of the same program (a venv's python3 -> python3.12): a link named after
	// an allowed program ("node" -> python3) in a writable directory would otherwise
	// run any program under that allowance.
	given := path.Base(filename)
	if stem(given) == stem(names[0]) {
		names = append(names, given)
	}
	kind, name := "", ""
	for _, n := range append(names[:len(names):len(names)], given) {
		if k := Risky(n); k != "" {
			kind, name = k, n
			break
		}
	}
	if kind == "" {
		return a, false, false
	}
	paths := []string{resolved}
	if strings.HasPrefix(filename, "/") {
		p := c.prof.resolve(filename)
		paths = append(paths, p, filepath.Clean(filename))
		// Not writable, and not below another process's cwd or descriptor
		// (/proc/PID/cwd/node, read-only by its text): a link the workload did not make.
		if _, _, link := procLink(p); !link {
			if w, _, _ := c.prof.checkPath(p, true); w != "" {
				names = append(names, given)
			}
		}
	}
	for _, pat := range c.prof.Exec {
		if execMatches(pat, paths, names) {
			return a, false, false
		}
	}
	a.Rule, a.Category = RuleExec, CatExecRisky
	a.Reason = fmt.Sprintf("exec of %s %q, absent from monitor.exec", kind, name)
	return a, true, false
}

func execMatches(pat string, paths, names []string) bool {
	list := names
	if strings.Contains(pat, "/") {
		list = paths
	}
	for _, s := range list {
		if doublestar.MatchUnvalidated(pat, s) && s != "" && s != "." {
			return true
		}
	}
	return false
}

func (c *checker) checkConnect(r *Record, a Alert) (Alert, bool, bool) {
	if r.Flags&flagUnwatched != 0 {
		return unwatched(a)
	}
	if r.Flags&flagFault != 0 {
		return faulted(a, "")
	}
	addr, ok := sockaddrString(r.Str[0])
	if !ok {
		return a, false, false // AF_UNSPEC: dissolves an association
	}
	a.Addr = addr
	for _, allowed := range c.prof.Connect {
		if addr == allowed {
			return a, false, false
		}
	}
	a.Rule, a.Category = RuleConnect, CatConnect
	a.Reason = "connect to " + addr + "; the only allowed destination is the egress proxy on 127.0.0.1:3128"
	if p, ok := strings.CutPrefix(addr, "unix:"); ok && strings.HasPrefix(p, "/") && c.prof.resolve(p) == ControlSocket {
		// Process 1 dials it, once, before any command exists, and is not watched
		// (Options.Nested): whoever else dials it goes for cordon's own channel.
		a.Category = CatConnectControl
		a.Reason = "connect to " + addr + ", cordon's control socket: only process 1 dials it, once, before any command runs"
	}
	return a, true, false
}

// splitArgv splits a NUL-separated argument block.
func splitArgv(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	parts := bytes.Split(b, []byte{0})
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}

// devFromKernel converts a kernel dev_t (major<<20 | minor) to stat(2)'s encoding.
func devFromKernel(d uint64) uint64 {
	major, minor := d>>20, d&0xfffff
	return (minor & 0xff) | (major&0xfff)<<8 | (minor&^0xff)<<12 | (major&^0xfff)<<32
}

// Risky returns the kind of a program name that a profile must allow explicitly
// ("shell", "interpreter", "network relay" or "dynamic loader"), or "" for any other
// program. Version suffixes are ignored: python3.11 is python.
func Risky(name string) string {
	if k := riskyKind(name); k != "" {
		return k
	}
	return riskyKind(stem(name))
}

// stem is a program name without its version suffix: python3.11 and python3 are python.
func stem(name string) string { return strings.TrimRight(name, "0123456789.") }

// riskyKind is the kind of program name, or "": a switch, so that nothing is built when
// cordon starts.
func riskyKind(name string) string {
	switch name {
	case "sh", "bash", "rbash", "dash", "zsh", "ksh", "mksh", "pdksh", "ash", "yash",
		"fish", "csh", "tcsh", "busybox", "elvish", "xonsh", "nu":
		return "shell"
	case "python", "pypy", "perl", "ruby", "irb", "node", "nodejs", "deno", "bun",
		"php", "lua", "luajit", "tclsh", "wish", "expect", "Rscript", "guile", "pwsh",
		"jshell", "julia", "gdb":
		return "interpreter"
	case "nc", "ncat", "netcat", "nc.openbsd", "nc.traditional", "socat", "telnet":
		return "network relay"
	}
	if isLoader(name) {
		return "dynamic loader"
	}
	return ""
}

// isLoader reports whether name is the dynamic loader's (ld-linux-x86-64.so.2,
// ld-linux-aarch64.so.1, ld-musl-x86_64.so.1, ld.so, ld64.so.2): run as a program it
// loads and runs any other (`ld.so /usr/bin/python3`) with no exec of that one, which
// only the kernel's loading of a program's interpreter (no exec either) needs.
func isLoader(name string) bool {
	if name == "ld.so" || strings.HasPrefix(name, "ld64.so") {
		return true
	}
	return strings.HasPrefix(name, "ld-") && strings.Contains(name, ".so")
}
