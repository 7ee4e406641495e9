package linux

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/cordonhq/cordon/internal/seccomp"
	"github.com/cordonhq/cordon/internal/testutil"
)

// seccompHelperEnv selects TestSeccompHelperProcess's mode in a re-executed test binary.
const seccompHelperEnv = "CORDON_TEST_SECCOMP_HELPER"

// Helper modes.
const (
	modeFiltered   = "filtered"   // load the filter, run the probes, report the status
	modeUnfiltered = "unfiltered" // run the probes bare: what the kernel alone answers
	modeX32        = "x32"        // load the filter, make an x32 call (amd64): must die
)

// A seccompProbe is one system call the helper makes. Its arguments make the kernel
// itself fail harmlessly (a bad pointer, fd -1, a multithreaded unshare), so that a
// probe the filter lets through by mistake does nothing, and so that its unfiltered
// answer differs from the filter's.
type seccompProbe struct {
	name string
	want unix.Errno // under the filter; 0 is success
	do   func() (uintptr, unix.Errno)
}

// probeCall makes system call nr with args.
func probeCall(nr uintptr, args ...uintptr) func() (uintptr, unix.Errno) {
	var a [6]uintptr
	copy(a[:], args)
	return func() (uintptr, unix.Errno) {
		r, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		return r, e
	}
}

// probeFD is like probeCall for a call returning a descriptor, which it closes.
func probeFD(nr uintptr, args ...uintptr) func() (uintptr, unix.Errno) {
	call := probeCall(nr, args...)
	return func() (uintptr, unix.Errno) {
		r, e := call()
		if e == 0 {
			unix.Close(int(r))
		}
		return r, e
	}
}

// cStrings keeps cString's results alive: a uintptr does not.
var cStrings [][]byte

// cString returns the address of s as a NUL-terminated string.
func cString(s string) uintptr {
	b := append([]byte(s), 0)
	cStrings = append(cStrings, b)
	return uintptr(unsafe.Pointer(&b[0]))
}

func seccompProbes() []seccompProbe {
	const (
		tiocsti         = 0x5412
		tioclinux       = 0x541c
		afVsock         = 40
		addrNoRandomize = 0x0040000
		badFD           = ^uintptr(0)  // -1
		atFDCWD         = ^uintptr(99) // -100
		keySpecSession  = ^uintptr(2)  // -3, KEY_SPEC_SESSION_KEYRING
	)
	var termios unix.Termios
	tcgets := func() (uintptr, unix.Errno) {
		ptmx, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			errno := unix.EIO
			errors.As(err, &errno)
			return 0, errno
		}
		defer unix.Close(ptmx)
		return probeCall(unix.SYS_IOCTL, uintptr(ptmx), unix.TCGETS, uintptr(unsafe.Pointer(&termios)))()
	}
	return []seccompProbe{
		{"keyctl", unix.EPERM, probeCall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, keySpecSession, 0)},
		{"add_key", unix.EPERM, probeCall(unix.SYS_ADD_KEY, 0, 0, 0, 0, keySpecSession)},
		{"request_key", unix.EPERM, probeCall(unix.SYS_REQUEST_KEY, 0, 0, 0, 0)},
		{"bpf", unix.EPERM, probeFD(unix.SYS_BPF, unix.BPF_PROG_LOAD, 0, 0)},
		{"perf_event_open", unix.EPERM, probeFD(unix.SYS_PERF_EVENT_OPEN, 0, 0, badFD, badFD, 0)},
		{"userfaultfd", unix.EPERM, probeFD(unix.SYS_USERFAULTFD, unix.O_CLOEXEC)},
		{"io_uring_setup", unix.EPERM, probeFD(unix.SYS_IO_URING_SETUP, 0, 0)},
		{"unshare newuser", unix.EPERM, probeCall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER)},
		{"mount", unix.EPERM, probeCall(unix.SYS_MOUNT, cString("none"), cString("/nonexistent-cordon"), cString("tmpfs"), 0, 0)},
		{"umount2", unix.EPERM, probeCall(unix.SYS_UMOUNT2, cString("/nonexistent-cordon"), 0)},
		{"chroot", unix.EPERM, probeCall(unix.SYS_CHROOT, cString("/nonexistent-cordon"))},
		{"setns", unix.EPERM, probeCall(unix.SYS_SETNS, badFD, 0)},
		{"name_to_handle_at", unix.EPERM, probeCall(unix.SYS_NAME_TO_HANDLE_AT, badFD, 0, 0, 0, 0)},
		{"adjtimex", unix.EPERM, probeCall(unix.SYS_ADJTIMEX, 0)},
		// Allowed (process 1 clones commands into their cgroups): a NULL struct is EINVAL.
		{"clone3", unix.EINVAL, probeCall(unix.SYS_CLONE3, 0, 0)},
		// CLONE_THREAD without CLONE_SIGHAND is EINVAL to the kernel: never a child.
		{"clone newuser", unix.EPERM, probeCall(unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_THREAD)},
		{"clone thread flags", unix.EINVAL, probeCall(unix.SYS_CLONE, unix.CLONE_THREAD)},
		{"socket vsock", unix.EPERM, probeFD(unix.SYS_SOCKET, afVsock, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)},
		{"socket inet", 0, probeFD(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)},
		{"socket unix", 0, probeFD(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)},
		{"socket netlink", 0, probeFD(unix.SYS_SOCKET, unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)},
		// The filter decides before the kernel looks the descriptor up: EBADF means the
		// call got through.
		{"ioctl tiocsti", unix.EPERM, probeCall(unix.SYS_IOCTL, badFD, tiocsti, 0)},
		{"ioctl tioclinux", unix.EPERM, probeCall(unix.SYS_IOCTL, badFD, tioclinux, 0)},
		{"ioctl tcgets bad fd", unix.EBADF, probeCall(unix.SYS_IOCTL, badFD, unix.TCGETS, 0)},
		{"ioctl tcgets pty", 0, tcgets},
		{"personality query", 0, probeCall(unix.SYS_PERSONALITY, 0xffffffff)},
		{"personality no aslr", unix.EPERM, probeCall(unix.SYS_PERSONALITY, addrNoRandomize)},
		{"getpid", 0, probeCall(unix.SYS_GETPID)},
		{"openat", 0, probeFD(unix.SYS_OPENAT, atFDCWD, cString("/dev/null"), unix.O_RDONLY|unix.O_CLOEXEC)},
		{"ptrace", unix.ESRCH, probeCall(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, 0x7ffffff0, 0, 0)},
		{"process_vm_readv", 0, func() (uintptr, unix.Errno) {
			return probeCall(unix.SYS_PROCESS_VM_READV, uintptr(os.Getpid()), 0, 0, 0, 0, 0)()
		}},
		{"seccomp action avail", 0, func() (uintptr, unix.Errno) {
			action := uint32(0x7fff0000) // SECCOMP_RET_ALLOW
			return probeCall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))()
		}},
		{"nr -1", unix.ENOSYS, probeCall(^uintptr(0))},
		{"above the table", unix.ENOSYS, probeCall(1000)},
	}
}

// TestSeccompHelperProcess is not a test: it is the process TestLoadSeccomp re-executes,
// and it does nothing unless seccompHelperEnv is set.
func TestSeccompHelperProcess(t *testing.T) {
	mode := os.Getenv(seccompHelperEnv)
	if mode == "" {
		return
	}
	os.Exit(seccompHelper(mode))
}

func seccompHelper(mode string) int {
	if mode != modeUnfiltered {
		arch, err := seccomp.Native()
		var prog []bpf.RawInstruction
		if err == nil {
			prog, err = seccomp.Program(arch)
		}
		if err == nil {
			// As process 1 does: no_new_privs (bwrap and the engines set it for it),
			// then the filter on this thread only, which the probes and the child run
			// from.
			runtime.LockOSThread()
			err = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
		}
		if err == nil {
			err = LoadSeccompThread(prog)
		}
		if err != nil {
			fmt.Println("load-error", err)
			return 2
		}
	}
	if mode == modeX32 {
		unix.Syscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
		fmt.Println("x32 call returned")
		return 0
	}
	for _, p := range seccompProbes() {
		_, errno := p.do()
		fmt.Printf("probe %s=%d\n", p.name, int(errno))
	}
	if mode == modeFiltered {
		fmt.Println("thread", seccompThread())
		out, err := exec.Command("cat", "/proc/self/status").Output()
		fmt.Println("child", statusField(out, "Seccomp"), statusField(out, "NoNewPrivs"), err)
	}
	return 0
}

// seccompThread returns the calling thread's Seccomp status field.
func seccompThread() string {
	b, _ := os.ReadFile("/proc/thread-self/status")
	return statusField(b, "Seccomp")
}

// statusField returns a field of /proc/PID/status.
func statusField(status []byte, name string) string {
	s := bufio.NewScanner(bytes.NewReader(status))
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// runSeccompHelper re-executes the test binary in mode and returns its output.
func runSeccompHelper(t *testing.T, mode string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSeccompHelperProcess$")
	cmd.Env = append(os.Environ(), seccompHelperEnv+"="+mode)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// probeResults parses the helper's "probe NAME=ERRNO" lines.
func probeResults(t *testing.T, out string) map[string]unix.Errno {
	t.Helper()
	got := map[string]unix.Errno{}
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "probe "); ok {
			name, n, _ := strings.Cut(rest, "=")
			e, err := strconv.Atoi(n)
			if err != nil {
				t.Fatalf("bad helper line %q", line)
			}
			got[name] = unix.Errno(e)
		}
	}
	return got
}

func requireSeccomp(t *testing.T) {
	t.Helper()
	status, _ := os.ReadFile("/proc/self/status")
	testutil.Require(t, statusField(status, "Seccomp") != "?", "a kernel with seccomp (CONFIG_SECCOMP_FILTER)")
	_, err := seccomp.Native()
	testutil.Require(t, err == nil, "an arch internal/seccomp knows (amd64, arm64)")
}

// TestLoadSeccomp loads the sandbox's filter in a child and checks, call by call, what
// the real kernel answers under it. It needs no privilege: no_new_privs suffices.
func TestLoadSeccomp(t *testing.T) {
	requireSeccomp(t)
	out, err := runSeccompHelper(t, modeFiltered)
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	bare, err := runSeccompHelper(t, modeUnfiltered)
	if err != nil {
		t.Fatalf("unfiltered helper: %v\n%s", err, bare)
	}
	got, kernel := probeResults(t, out), probeResults(t, bare)
	for _, p := range seccompProbes() {
		t.Run(p.name, func(t *testing.T) {
			g, ok := got[p.name]
			if !ok {
				t.Fatalf("no result; helper said:\n%s", out)
			}
			if g != p.want {
				t.Errorf("got errno %d (%v); want %d (%v)", int(g), g, int(p.want), p.want)
			}
			if p.want == unix.EPERM && kernel[p.name] == unix.EPERM {
				t.Logf("not decisive here: the kernel alone also says EPERM")
			}
		})
	}
	var sawThread, sawChild bool
	for _, line := range strings.Split(out, "\n") {
		if th, ok := strings.CutPrefix(line, "thread "); ok {
			sawThread = true
			if th != "2" {
				t.Errorf("the filtered thread has Seccomp %q; want 2", th)
			}
		}
		if child, ok := strings.CutPrefix(line, "child "); ok {
			sawChild = true
			if child != "2 1 <nil>" {
				t.Errorf("a child of the filtered thread has Seccomp, NoNewPrivs, error %q; want 2 1 <nil>", child)
			}
		}
	}
	if !sawThread || !sawChild {
		t.Errorf("helper reported no thread or child status:\n%s", out)
	}
}

func TestLoadSeccompRejectsBadPrograms(t *testing.T) {
	tests := []struct {
		name string
		n    int
	}{
		{"empty", 0},
		{"too long", 4097},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := LoadSeccompThread(make([]bpf.RawInstruction, tt.n)); err == nil {
				t.Error("loaded")
			}
		})
	}
}
