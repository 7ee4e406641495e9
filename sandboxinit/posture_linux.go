package sandboxinit

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// PostureMain is `internal posture`: it measures the sandbox from the point of view of
// the command it runs as, prints the [Posture] on stdout and exits 0 when every check
// passed, 1 when one failed, 2 on bad arguments. It changes nothing it can reach
// (each probe is refused, or fails harmlessly), and its only signal to process 1 is
// SIGUSR1, which process 1 ignores (or forwards back here, where it is caught).
//
// Modelled on gVisor's sandbox posture test: what the sandbox should look like is
// written down, and each measurement is compared with it.
func PostureMain(args []string) int {
	// First, before the runtime opens anything of its own: what the command inherited.
	fds, fdErr := openFDs()
	fs := flag.NewFlagSet("internal posture", flag.ContinueOnError)
	var writable stringList
	fs.Var(&writable, "writable", "a mount point the contract makes writable (repeatable)")
	noop := fs.Bool("noop", false, "exit at once (the child of the user namespace probe)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *noop {
		return 0
	}
	p := measure(writable, fds, fdErr)
	out, _ := json.MarshalIndent(p, "", "  ")
	os.Stdout.Write(append(out, '\n'))
	if !p.OK() {
		return 1
	}
	return 0
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// measure makes every check, in order.
func measure(writable, fds []string, fdErr error) *wire.Posture {
	p := &wire.Posture{Version: wire.PostureVersion}
	add := func(cs ...wire.PostureCheck) { p.Checks = append(p.Checks, cs...) }
	add(identityChecks()...)
	add(statusChecks()...)
	add(landlockChecks(writable)...)
	add(seccompProbes()...)
	add(pid1Checks()...)
	add(networkCheck())
	add(kernelCheck())
	add(mountCheck(writable))
	add(stdioChecks()...)
	add(fdCheck(fds, fdErr))
	add(cgroupChecks()...)
	return p
}

func check(name, want, got string, ok bool, detail string) wire.PostureCheck {
	return wire.PostureCheck{Name: name, Want: want, Got: got, OK: ok, Detail: detail}
}

func failed(name, want string, err error) wire.PostureCheck {
	return check(name, want, "error", false, err.Error())
}

func identityChecks() []wire.PostureCheck {
	uid, gid := os.Getuid(), os.Getgid()
	ids := check("uid:gid", "not 0", fmt.Sprintf("%d:%d", uid, gid), uid != 0 && gid != 0,
		"the command's real ids inside the sandbox")
	root, err := hostRoot()
	if err != nil {
		return []wire.PostureCheck{ids, failed("host root", "no", err)}
	}
	return []wire.PostureCheck{ids, check("host root", "no", yesNo(root), !root,
		"sysctls belong to host root: /proc/sys/kernel/core_pattern shows as the caller's uid exactly when the caller is host root")}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// statusFields are the /proc/PID/status fields every thread must show, with the
// value they must have ("" for a check of its own below).
var statusFields = []struct{ key, want, detail string }{
	{"CapInh", "0000000000000000", "inheritable capabilities"},
	{"CapPrm", "0000000000000000", "permitted capabilities"},
	{"CapEff", "0000000000000000", "effective capabilities"},
	{"CapBnd", "0000000000000000", "bounding set: nothing to regain through exec"},
	{"CapAmb", "0000000000000000", "ambient capabilities"},
	{"NoNewPrivs", "1", "no_new_privs: exec grants nothing (setuid, file capabilities)"},
	{"Seccomp", "2", "seccomp mode 2: a filter"},
	{"Seccomp_filters", "", "number of seccomp filters stacked"},
}

// statusChecks read /proc/self/task/*/status: every thread, not only the main one
// (gVisor's posture test compares per-thread state for the same reason).
func statusChecks() []wire.PostureCheck {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return []wire.PostureCheck{failed("thread status", "readable", err)}
	}
	values := map[string]map[string][]string{} // key -> value -> tids
	for _, t := range tasks {
		data, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "status"))
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(data), "\n") {
			k, v, _ := strings.Cut(line, ":")
			if values[k] == nil {
				values[k] = map[string][]string{}
			}
			v = strings.TrimSpace(v)
			values[k][v] = append(values[k][v], t.Name())
		}
	}
	var out []wire.PostureCheck
	for _, f := range statusFields {
		got := describeValues(values[f.key])
		detail := fmt.Sprintf("%s; /proc/self/task/*/status (%d threads)", f.detail, len(tasks))
		if f.key == "Seccomp_filters" {
			n, err := strconv.Atoi(got)
			out = append(out, check("seccomp filters", ">= 1", got, err == nil && n >= 1, detail))
			continue
		}
		name := map[string]string{"NoNewPrivs": "no_new_privs", "Seccomp": "seccomp mode"}[f.key]
		if name == "" {
			name = f.key
		}
		want := f.want
		if strings.HasPrefix(f.key, "Cap") {
			want = "0"
			if got == f.want {
				got = "0"
			}
		}
		out = append(out, check(name, want, got, got == want, detail))
	}
	return out
}

// describeValues is the one value every thread shows, or each value with its threads.
func describeValues(v map[string][]string) string {
	switch len(v) {
	case 0:
		return "absent"
	case 1:
		for k := range v {
			return k
		}
	}
	var parts []string
	for k, tids := range v {
		parts = append(parts, k+" (threads "+strings.Join(tids, ",")+")")
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// landlockChecks probe what Landlock alone refuses: DAC lets a process write its own
// /proc/self/comm, and Landlock gives /proc read-only. Then creating a file where the
// contract grants nothing, and where it does (/tmp).
func landlockChecks(writable []string) []wire.PostureCheck {
	abi := linux.LandlockABI()
	out := []wire.PostureCheck{check("landlock abi", ">= 1", strconv.Itoa(abi), abi >= 1, "the kernel's Landlock ABI version")}
	e := openErrno("/proc/self/comm", os.O_WRONLY)
	out = append(out, check("landlock: write /proc/self/comm", "EACCES", errnoName(e), e == syscall.EACCES,
		"the file's mode lets its owner write it: only Landlock (/proc read-only) refuses"))
	for _, dir := range []string{"/", "/etc", paths.SandboxDir} {
		if granted(dir, writable) {
			continue
		}
		e := createErrno(dir)
		out = append(out, check("write outside the grant: "+dir, "refused", errnoName(e), e != 0,
			"create a file; EACCES from Landlock, EROFS from a read-only mount"))
	}
	if granted("/tmp", writable) {
		e := createErrno("/tmp")
		out = append(out, check("write inside the grant: /tmp", "ok", errnoName(e), e == 0,
			"create and remove a file: the contract's grants still work"))
	}
	return out
}

func granted(p string, writable []string) bool {
	for _, w := range writable {
		w = filepath.Clean(w)
		if p == w || strings.HasPrefix(p, strings.TrimSuffix(w, "/")+"/") {
			return true
		}
	}
	return false
}

func openErrno(p string, flags int) syscall.Errno { return linux.ProbeOpen(p, flags) }

// createErrno creates (and removes) a new file in dir.
func createErrno(dir string) syscall.Errno {
	return linux.ProbeCreate(filepath.Join(dir, fmt.Sprintf(".cordon-posture-%d", os.Getpid())))
}

func errnoOf(err error) syscall.Errno {
	var e syscall.Errno
	if err == nil {
		return 0
	}
	if errors.As(err, &e) {
		return e
	}
	return syscall.EINVAL
}

// errnoNames are the errnos the probes expect or commonly get.
var errnoNames = map[syscall.Errno]string{
	syscall.EPERM: "EPERM", syscall.EACCES: "EACCES", syscall.ENOSYS: "ENOSYS", syscall.EROFS: "EROFS",
	syscall.EINVAL: "EINVAL", syscall.EFAULT: "EFAULT", syscall.ENOENT: "ENOENT", syscall.ESRCH: "ESRCH",
	syscall.EBADF: "EBADF", syscall.ENOTDIR: "ENOTDIR", syscall.EEXIST: "EEXIST", syscall.ENOKEY: "ENOKEY",
}

func errnoName(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	if n, ok := errnoNames[e]; ok {
		return n
	}
	return "errno " + strconv.Itoa(int(e)) + " (" + e.Error() + ")"
}

// seccompProbes make calls the sandbox's filter refuses.
func seccompProbes() []wire.PostureCheck {
	probes := []struct {
		name string
		want syscall.Errno
		call func() syscall.Errno
	}{
		{"keyctl", syscall.EPERM, linux.ProbeKeyctl},
		{"bpf", syscall.EPERM, linux.ProbeBPF},
		{"unshare(CLONE_NEWUSER)", syscall.EPERM, linux.ProbeUnshareUser},
		{"mount", syscall.EPERM, linux.ProbeMount},
		{"perf_event_open", syscall.EPERM, linux.ProbePerfEventOpen},
		{"io_uring_setup", syscall.EPERM, linux.ProbeIOUringSetup},
	}
	var out []wire.PostureCheck
	for _, p := range probes {
		e := p.call()
		out = append(out, check("seccomp: "+p.name, errnoName(p.want), errnoName(e), e == p.want,
			"arguments the kernel itself would reject: nothing changes if the call gets through"))
	}
	return append(out, userNamespaceCheck())
}

// userNamespaceCheck starts /bin/true in a new user namespace through clone3 (a
// pidfd makes Go use it), which the filter cannot look into: bwrap's
// --disable-userns or the engine's profile must refuse it.
func userNamespaceCheck() wire.PostureCheck {
	var pidfd int
	cmd := exec.Command("/proc/self/exe", "internal", "posture", "--noop")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, PidFD: &pidfd}
	err := cmd.Run()
	got := "created"
	if err != nil {
		got = "refused: " + errnoName(errnoOf(err))
	} else {
		linux.Close(pidfd)
	}
	return check("user namespace (clone3)", "refused", got, err != nil,
		"clone3's flags are out of the filter's sight: --disable-userns (bwrap) or the engine's clone3 ENOSYS refuses it")
}

// pid1Checks try to reach process 1, which holds the sandbox's control channel (and
// held the egress listener until it handed it over): it is not dumpable and ignores
// signals.
func pid1Checks() []wire.PostureCheck {
	e := openErrno("/proc/1/fd", syscall.O_RDONLY|syscall.O_DIRECTORY)
	out := []wire.PostureCheck{check("process 1: open /proc/1/fd", "EACCES", errnoName(e), e == syscall.EACCES,
		"process 1 is not dumpable: its descriptors stay closed to commands of its uid")}
	e = pid1FDs()
	out = append(out, check("process 1: open /proc/1/fd/N", "EACCES", errnoName(e), e == syscall.EACCES,
		"each of process 1's descriptors 0-15, through its magic link"))
	e = openErrno("/proc/1/environ", syscall.O_RDONLY)
	out = append(out, check("process 1: read /proc/1/environ", "EACCES", errnoName(e), e == syscall.EACCES, ""))
	e = linux.ProbePtraceSeize(1)
	out = append(out, check("process 1: ptrace(PTRACE_SEIZE)", "EPERM", errnoName(e), e == syscall.EPERM, "detached at once if it worked"))
	e = linux.ProbePidfdGetfd(1, 0)
	out = append(out, check("process 1: pidfd_getfd", "EPERM", errnoName(e), e == syscall.EPERM,
		"pidfd_open(1) then pidfd_getfd of its descriptor 0"))
	e = linux.ProbeProcessVMRead(1)
	out = append(out, check("process 1: process_vm_readv", "EPERM", errnoName(e), e == syscall.EPERM, ""))
	return append(out, signalPid1())
}

// pid1FDs opens each of process 1's first descriptors through /proc/1/fd (without
// reading): EACCES when every one is refused, else the first other answer.
func pid1FDs() syscall.Errno {
	for fd := 0; fd < 16; fd++ {
		e := openErrno("/proc/1/fd/"+strconv.Itoa(fd), syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY)
		if e != syscall.EACCES && e != syscall.ENOENT {
			return e
		}
	}
	return syscall.EACCES
}

// signalPid1 sends SIGUSR1, whose default action ends a process, to process 1; it must
// still run afterwards. Process 1 forwards it to the command's process group, so this
// process catches it.
func signalPid1() wire.PostureCheck {
	const name, want = "process 1: kill(1, SIGUSR1)", "still running"
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGUSR1)
	defer signal.Stop(caught)
	before := linux.ProcessStart(1)
	if err := linux.Kill(1, 0); err != nil {
		return check(name, want, "not signalled: "+errnoName(errnoOf(err)), true, "signal 0 refused: out of reach")
	}
	if err := linux.Kill(1, syscall.SIGUSR1); err != nil {
		return check(name, want, "refused: "+errnoName(errnoOf(err)), true, "")
	}
	forwarded := "not forwarded"
	select {
	case <-caught:
		forwarded = "forwarded back to the command"
	case <-time.After(300 * time.Millisecond):
	}
	after := linux.ProcessStart(1)
	ok := before != 0 && after == before
	got := want
	if !ok {
		got = "gone"
	}
	return check(name, want, got, ok, "a default action would end it; signal 0 is permitted (same uid); "+forwarded)
}

func networkCheck() wire.PostureCheck {
	ifs, err := net.Interfaces()
	if err != nil {
		return failed("network interfaces", "lo", err)
	}
	var names []string
	for _, i := range ifs {
		names = append(names, i.Name)
	}
	got := strings.Join(names, ",")
	return check("network interfaces", "lo", got, got == "lo", "egress only through the proxy's listener on loopback")
}

func kernelCheck() wire.PostureCheck {
	w := kernelWritable(sysctlsWritable()) // the whole walk: a report, off the path of a start
	got := "none"
	if len(w) > 0 {
		got = strings.Join(w, ", ")
	}
	return check("writable kernel interfaces", "none", got, len(w) == 0,
		"faccessat(W_OK, AT_EACCESS) over /proc/sys (minus the sandbox's own namespaced sysctls) and /proc, /sys controls; faccessat does not see Landlock")
}

// mountCheck lists the read-write mounts: each must be granted, a kernel file system
// every sandbox has, or a /dev/null mask; none may be a kernel-global file system.
func mountCheck(writable []string) wire.PostureCheck {
	const name = "read-write mounts"
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return failed(name, "granted only", err)
	}
	allowed := map[string]bool{}
	for _, w := range writable {
		allowed[w] = true
	}
	var rw, bad []string
	masks := 0
	mounts := linux.ParseMountinfo(string(data))
	for _, m := range mounts {
		if m.ReadOnly() {
			continue
		}
		switch {
		case kernelGlobal[m.FSType]:
			bad = append(bad, m.Point+" ("+m.FSType+", a kernel interface)")
		case allowed[m.Point] || kernelFS[m.Point] == m.FSType:
			rw = append(rw, m.Point)
		case m.Point == "/sys/fs/cgroup" && m.FSType == "tmpfs" && cgroupV1Only(mounts):
			// Docker on a cgroup v1 host: a private tmpfs holding the read-only
			// controller mounts of the container's own cgroups (docs/backends.md).
			rw = append(rw, m.Point+" (tmpfs of read-only cgroup v1 mounts)")
		case linux.IsDevNull(m.Point):
			// A read-write mount of /dev/null discards writes (the engines mask
			// kernel files that way).
			masks++
		default:
			bad = append(bad, m.Point+" ("+m.FSType+")")
		}
	}
	got := strings.Join(append(append([]string(nil), rw...), bad...), ", ")
	detail := "granted: " + strings.Join(writable, ", ") + "; with /dev, /dev/pts, /dev/shm, /dev/mqueue, /proc"
	if masks > 0 {
		detail += fmt.Sprintf("; %d /dev/null masks not listed", masks)
	}
	if len(bad) > 0 {
		detail += "; not granted: " + strings.Join(bad, ", ")
	}
	return check(name, "granted only", got, len(bad) == 0, detail)
}

// cgroupV1Only reports whether every cgroup mount below /sys/fs/cgroup is a read-only
// v1 hierarchy (and there is one).
func cgroupV1Only(mounts []linux.MountInfo) bool {
	n := 0
	for _, m := range mounts {
		if !strings.HasPrefix(m.Point, "/sys/fs/cgroup/") {
			continue
		}
		if m.FSType != "cgroup" || !m.ReadOnly() {
			return false
		}
		n++
	}
	return n > 0
}

// stdioChecks: the command's stdio are pipes, sockets, /dev/null or a terminal, never
// a file or directory of the host.
func stdioChecks() []wire.PostureCheck {
	var out []wire.PostureCheck
	for fd := 0; fd <= 2; fd++ {
		name := fmt.Sprintf("stdio: fd %d", fd)
		const want = "pipe, socket or device"
		target, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		typ, err := linux.FDType(fd)
		if err != nil {
			out = append(out, check(name, want, "closed", true, "not open: nothing reached through it"))
			continue
		}
		kind, ok := "other", false
		switch typ {
		case syscall.S_IFIFO:
			kind, ok = "pipe", true
		case syscall.S_IFSOCK:
			kind, ok = "socket", true
		case syscall.S_IFCHR:
			kind, ok = "device", true
		case syscall.S_IFREG:
			kind = "regular file"
		case syscall.S_IFDIR:
			kind = "directory"
		}
		out = append(out, check(name, want, kind, ok, target))
	}
	return out
}

// openFDs lists the descriptors open beyond stdio that the command inherited, with
// what each refers to.
func openFDs() ([]string, error) {
	fds, err := linux.InheritedFDs()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, fd := range fds {
		name := strconv.Itoa(fd)
		target, _ := os.Readlink("/proc/self/fd/" + name)
		out = append(out, name+" -> "+target)
	}
	return out, nil
}

func fdCheck(fds []string, err error) wire.PostureCheck {
	const name, want = "descriptors beyond stdio", "none"
	if err != nil {
		return failed(name, want, err)
	}
	if len(fds) == 0 {
		return check(name, want, "none", true, "what the command inherited, from /proc/self/fd")
	}
	return check(name, want, strings.Join(fds, ", "), false, "inherited from process 1 or the engine")
}

// cgroupChecks show the command's cgroup and look for any cgroup file system it could
// write: the mount points of every cgroup and cgroup2 mount, their cgroup.procs and
// subtree_control, and the command's own cgroup directory in each.
func cgroupChecks() []wire.PostureCheck {
	self, _ := os.ReadFile("/proc/self/cgroup")
	own := map[string]string{} // hierarchy id -> path
	for _, line := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 {
			own[f[0]] = f[2]
		}
	}
	out := []wire.PostureCheck{check("cgroup", "any", strings.ReplaceAll(strings.TrimSpace(string(self)), "\n", " "), true,
		"/proc/self/cgroup: each command runs in a cgroup of its own")}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return append(out, failed("writable cgroup file system", "none", err))
	}
	var mounts, writable []string
	for _, m := range linux.ParseMountinfo(string(data)) {
		if m.FSType != "cgroup" && m.FSType != "cgroup2" {
			continue
		}
		mounts = append(mounts, m.Point)
		candidates := []string{m.Point, m.Point + "/cgroup.procs", m.Point + "/cgroup.subtree_control"}
		if m.FSType == "cgroup2" && own["0"] != "" {
			candidates = append(candidates, filepath.Join(m.Point, own["0"]), filepath.Join(m.Point, own["0"], "cgroup.procs"))
		}
		for _, c := range candidates {
			if linux.Writable(c) {
				writable = append(writable, c)
			}
		}
	}
	got, detail := "none", "no cgroup file system is mounted"
	if len(mounts) > 0 {
		detail = "mounted at " + strings.Join(mounts, ", ") + "; faccessat(W_OK, AT_EACCESS)"
	}
	if len(writable) > 0 {
		got = strings.Join(writable, ", ")
	}
	return append(out, check("writable cgroup file system", "none", got, len(writable) == 0, detail))
}
