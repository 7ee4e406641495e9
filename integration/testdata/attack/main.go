// Command attack is what the isolation tests run inside a sandbox: each mode tries one
// class of escape and prints one line per attempt, "NAME ok" when it got through and
// "NAME denied: ERRNO" when the kernel refused it. It is static (CGO_ENABLED=0) so it
// runs in any image.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: attack MODE")
		os.Exit(2)
	}
	modes := map[string]func(){
		"sysctl": sysctl, "pid1": pid1, "signals": signals, "cgroup": cgroup,
		"seccomp": seccomp, "stdio": stdio, "noop": func() {}, "trace-child": traceChild,
		"pidns": pidns, "exec-via-cwd": execViaCwd, "flood": flood, "pending-fill": pendingFill, "fresh-open": freshOpen, "opens": opens,
		"inotify-hog": inotifyHog, "inotify-one": inotifyOne, "gate-lie": gateLie,
	}
	f, ok := modes[os.Args[1]]
	if !ok {
		fmt.Fprintln(os.Stderr, "unknown mode")
		os.Exit(2)
	}
	f()
}

func report(name string, err error) {
	if err == nil {
		fmt.Printf("%s ok\n", name)
		return
	}
	fmt.Printf("%s denied: %v\n", name, err)
}

// sysctl writes the machine-wide kernel controls a root process could write.
func sysctl() {
	for _, p := range []string{
		"/proc/sys/kernel/core_pattern", "/proc/sys/kernel/modprobe", "/proc/sys/vm/drop_caches",
		"/proc/sysrq-trigger", "/proc/sys/fs/binfmt_misc/register", "/proc/sys/kernel/hostname",
		"/sys/kernel/uevent_helper", "/proc/sys/kernel/ns_last_pid",
	} {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err == nil {
			f.Close()
		}
		report("write "+p, err)
	}
}

// pid1 reaches for process 1's descriptors and memory.
func pid1() {
	_, _, e := syscall.Syscall6(syscall.SYS_PTRACE, 0x4206 /* PTRACE_SEIZE */, 1, 0, 0, 0, 0)
	report("ptrace-seize 1", errno(e))
	_, _, e = syscall.Syscall(syscall.SYS_PTRACE, syscall.PTRACE_ATTACH, 1, 0)
	report("ptrace-attach 1", errno(e))
	if _, err := os.ReadDir("/proc/1/fd"); err != nil {
		report("list /proc/1/fd", err)
	} else {
		fmt.Println("list /proc/1/fd: numbers only") // as host root in a container
	}
	for n := 0; n < 16; n++ {
		f, err := os.Open(fmt.Sprintf("/proc/1/fd/%d", n))
		if err == nil {
			f.Close()
			report(fmt.Sprintf("open /proc/1/fd/%d", n), nil)
		} else if !os.IsNotExist(err) {
			continue
		}
	}
	_, err := os.ReadFile("/proc/1/environ")
	report("read /proc/1/environ", err)
	f, err := os.Open("/proc/1/mem")
	if err == nil {
		f.Close()
	}
	report("open /proc/1/mem", err)
	pidfd, _, e := syscall.Syscall(434 /* pidfd_open */, 1, 0, 0)
	if e != 0 {
		report("pidfd_open 1", errno(e))
		return
	}
	stolen := 0
	for n := 0; n < 64; n++ {
		fd, _, e := syscall.Syscall(438 /* pidfd_getfd */, pidfd, uintptr(n), 0)
		if e == 0 {
			stolen++
			syscall.Close(int(fd))
		}
	}
	if stolen > 0 {
		report("pidfd_getfd 1", nil)
	} else {
		report("pidfd_getfd 1", fmt.Errorf("every descriptor refused"))
	}
}

// signals sends process 1 what would end a Go program or stop it, then checks it is
// still there.
func signals() {
	for _, s := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGABRT, syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGTRAP, syscall.SIGSYS, syscall.SIGPIPE,
		syscall.SIGTSTP, syscall.SIGSTOP, syscall.SIGKILL, syscall.SIGUSR1, syscall.SIGXCPU} {
		_ = syscall.Kill(1, s)
	}
	time.Sleep(200 * time.Millisecond)
	data, err := os.ReadFile("/proc/1/stat")
	if err != nil {
		report("pid1 alive", err)
		return
	}
	f := strings.Fields(string(data))
	if len(f) > 2 && (f[2] == "T" || f[2] == "t" || f[2] == "Z") {
		fmt.Printf("pid1 state %s\n", f[2])
		return
	}
	fmt.Println("pid1 alive")
}

// cgroup looks for a writable cgroup file system and tries to leave its cgroup.
func cgroup() {
	data, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.Contains(line, " - cgroup") {
			continue
		}
		mp := strings.Fields(line)[4]
		_ = filepath.WalkDir(mp, func(p string, d os.DirEntry, err error) error {
			if err == nil && (d.Name() == "cgroup.procs" || d.Name() == "cgroup.kill") {
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err == nil {
					f.Close()
					report("write "+p, nil)
				}
			}
			return nil
		})
	}
	fmt.Println("cgroup done")
}

// seccomp tries what a coding agent never needs.
func seccomp() {
	try := func(name string, nr uintptr, a ...uintptr) {
		for len(a) < 6 {
			a = append(a, 0)
		}
		_, _, e := syscall.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		report(name, errno(e))
	}
	try("keyctl", 250, 0 /* KEYCTL_GET_KEYRING_ID */, ^uintptr(2) /* session */, 0)
	try("bpf", 321, 0, 0, 0)
	try("unshare-user", syscall.SYS_UNSHARE, syscall.CLONE_NEWUSER)
	try("perf_event_open", 298, 0, 0, ^uintptr(0), ^uintptr(0), 0)
	try("userfaultfd", 323, 0)
	try("io_uring_setup", 425, 1, 0)
	// clone3 (a pidfd makes Go use it) into a new user namespace: the filter cannot
	// see its flags, the layer underneath must refuse.
	var pidfd int
	cmd := exec.Command("/proc/self/exe", "noop")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, PidFD: &pidfd}
	report("clone3-newuser", cmd.Run())
	try("socket-vsock", syscall.SYS_SOCKET, 40, syscall.SOCK_STREAM, 0)
	try("mount", syscall.SYS_MOUNT, 0, 0, 0, 0, 0)
}

// pidns tries to become process 1 of a pid namespace of its own, whose every thread
// the monitor would take for cordon's init (unwatched): clone3 (a pidfd makes Go use it),
// whose flags the seccomp filter cannot see, with CLONE_NEWPID alone and inside a new
// user namespace.
func pidns() {
	for _, c := range []struct {
		name  string
		flags uintptr
	}{{"clone3-newpid", syscall.CLONE_NEWPID}, {"clone3-newuser-newpid", syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID}} {
		var pidfd int
		cmd := exec.Command("/proc/self/exe", "noop")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: c.flags, PidFD: &pidfd}
		report(c.name, cmd.Run())
	}
}

// execViaCwd runs os.Args[2] of the working directory, with the arguments after it,
// through another process's cwd link (/proc/PID/cwd/NAME), a path read-only by its
// text: a sleeper started here is that process.
func execViaCwd() {
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		report("exec-via-cwd", err)
		return
	}
	p := fmt.Sprintf("/proc/%d/cwd/%s", sleeper.Process.Pid, os.Args[2])
	report("exec-via-cwd", syscall.Exec(p, os.Args[2:], os.Environ()))
}

// flood opens a 4000-byte path outside any profile from os.Args[2] threads,
// os.Args[3] times each: every open is an event sent to the run's ring buffer, a
// workload drowning its own deviations.
func flood() {
	threads, _ := strconv.Atoi(os.Args[2])
	n, _ := strconv.Atoi(os.Args[3])
	p := "/" + strings.Repeat("A", 3999)
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			for j := 0; j < n; j++ {
				if fd, err := syscall.Open(p, syscall.O_RDONLY, 0); err == nil {
					syscall.Close(fd)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Println("flood done")
}

// stdio reports what the command's standard descriptors are.
func stdio() {
	for n := 0; n < 3; n++ {
		t, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", n))
		fmt.Printf("fd%d %s\n", n, t)
	}
	t, err := os.Readlink("/proc/1/fd/1")
	if err == nil {
		fmt.Printf("pid1 stdout %s\n", t)
	} else {
		report("readlink /proc/1/fd/1", err)
	}
}

func errno(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// traceChild is the control: a debugger's ptrace of the command's own child works.
func traceChild() {
	runtime.LockOSThread() // ptrace requests come from the tracing thread
	cmd := exec.Command("/proc/self/exe", "noop")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true}
	if err := cmd.Start(); err != nil {
		fmt.Printf("traced child: %v\n", err)
		return
	}
	var ws syscall.WaitStatus
	_, err := syscall.Wait4(cmd.Process.Pid, &ws, 0, nil)
	if err == nil && ws.Stopped() {
		fmt.Println("traced child: stopped under ptrace")
		_ = syscall.PtraceDetach(cmd.Process.Pid)
	} else {
		fmt.Printf("traced child: %v %v\n", err, ws)
	}
	_ = cmd.Wait()
}
