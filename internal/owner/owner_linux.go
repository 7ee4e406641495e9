package owner

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

func processID() int { return os.Getpid() }

// startOf is pid's start time on the host's boot clock, 0 when it is gone (or a
// zombie). /proc counts a start time from the boot clock of the time namespace of the
// process reading it, so the reader's own boottime offset is taken off: a cordon in a
// time namespace of its own (`unshare --time`) records, and judges, the same number
// as one on the host.
func startOf(pid int) uint64 {
	t := linux.ProcessStart(pid)
	if t == 0 {
		return 0
	}
	off := boottimeOffset()
	if off > 0 && uint64(off) >= t || off < 0 && t+uint64(-off) < t {
		return 0 // not a time this boot had: count it as gone rather than wrap
	}
	n := uint64(int64(t) - off)
	if n == 0 {
		n = 1 // 0 means "gone"; a process started at the very tick of boot is not
	}
	return n
}

// userHZ is the unit of /proc's start times (the kernel's USER_HZ, 100 on Linux).
const userHZ = 100

// boottimeOffset is this process's time namespace's boottime offset in /proc's clock
// ticks: the line "boottime SECONDS NANOSECONDS" of /proc/self/timens_offsets, 0
// where the kernel has no time namespaces. It is the offset of the namespace this
// process's children get, which is its own unless it unshared a time namespace itself
// (cordon never does).
func boottimeOffset() int64 {
	data, err := os.ReadFile("/proc/self/timens_offsets")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "boottime" {
			continue
		}
		sec, err1 := strconv.ParseInt(f[1], 10, 64)
		nsec, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return 0
		}
		return sec*userHZ + nsec/(1e9/userHZ)
	}
	return 0
}

// exists reports whether a process with pid runs.
func exists(pid int) bool { return linux.ProcessStart(pid) != 0 }

// pidNamespace names this process's pid namespace ("4026531836"), or "".
func pidNamespace() string {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
}

// initPIDNS is the inode of the host's initial pid namespace: the kernel gives it this
// fixed number (PROC_PID_INIT_INO), so a process in any other reads another.
const initPIDNS = "4026531836"

// seesEveryProcess reports whether /proc lists every process on the host: this one is
// root (no hidepid hides a process from it) in the initial pid namespace, and /proc
// is that namespace's (/proc/self is this process).
func seesEveryProcess() bool {
	self, err := os.Readlink("/proc/self")
	return os.Geteuid() == 0 && pidNamespace() == initPIDNS && err == nil && self == strconv.Itoa(os.Getpid())
}

// aliveElsewhere judges p, recorded in another pid namespace, by the processes in
// /proc: the one in p's namespace whose pid there (the last of its NSpid) is p's is
// p while it has not exited and its start time matches (when it and this process
// count time alike; else it may be p, and is taken as p). With none, p is gone when all says /proc lists every
// process and each one that could be p could be read; else it counts as alive.
func aliveElsewhere(p Process, all bool) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	want := "pid:[" + p.PIDNS + "]"
	unsure := false
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		inner, depth, err := innerPID(name)
		if err != nil {
			unsure = unsure || !gone(err)
			continue
		}
		if inner != p.PID {
			continue
		}
		// The pid namespace link needs more than reading the status does (it may be
		// refused, even to root, for a process of a more privileged user namespace);
		// one that is refused may be p unless the process is in /proc's own namespace
		// (one pid deep), which p's is not when all says /proc is this process's.
		ns, err := os.Readlink("/proc/" + name + "/ns/pid")
		if err != nil {
			unsure = unsure || !gone(err) && depth > 1
			continue
		}
		if ns != want {
			continue
		}
		pid, _ := strconv.Atoi(name)
		start := startOf(pid)
		switch {
		case start == 0:
			return false // it has exited: a zombie (whose time namespace is gone)
		case p.Start == 0 || !sameClock(name):
			return true
		}
		return start == p.Start
	}
	return !all || unsure
}

// gone reports whether err says the process went away while it was read.
func gone(err error) bool { return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) }

// innerPID is the pid of /proc/NAME in its own pid namespace (the last field of the
// NSpid line of its status), and how many pid namespaces deep it is from /proc's.
func innerPID(name string) (pid, depth int, err error) {
	data, err := os.ReadFile("/proc/" + name + "/status")
	if err != nil {
		return 0, 0, err
	}
	s := string(data)
	i := strings.Index(s, "\nNSpid:")
	if i < 0 {
		return 0, 0, errors.New("no NSpid line")
	}
	line, _, _ := strings.Cut(s[i+len("\nNSpid:"):], "\n")
	f := strings.Fields(line)
	if len(f) == 0 {
		return 0, 0, errors.New("an empty NSpid line")
	}
	pid, err = strconv.Atoi(f[len(f)-1])
	return pid, len(f), err
}

// sameClockOf is [sameClock] of a pid.
func sameClockOf(pid int) bool { return sameClock(strconv.Itoa(pid)) }

// sameClock reports whether /proc/NAME is in this process's time namespace (or time
// namespaces are not there at all): a start time in /proc is counted from the boot
// clock of the namespace of the process reading it, so only then is its start the one
// it recorded itself.
func sameClock(name string) bool {
	mine, err1 := os.Readlink("/proc/self/ns/time")
	theirs, err2 := os.Readlink("/proc/" + name + "/ns/time")
	if errors.Is(err1, fs.ErrNotExist) && errors.Is(err2, fs.ErrNotExist) {
		return true
	}
	return err1 == nil && err2 == nil && mine == theirs
}
