package linux

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KillLauncher SIGKILLs p, a launcher such as bwrap, with every child it has and
// every member of its process group (p's pid: it must have been started with
// Setpgid). A launcher's child that outlived it would be orphaned where nothing
// finds it: bwrap's child sets its parent-death signal only just before it runs the
// command, and when bwrap dies earlier it goes on, holding whatever bwrap gave it.
// Each child of bwrap is process 1 of its pid namespace, so killing it kills
// everything in the namespace.
//
// p is stopped first (SIGSTOP) and waited for to stop, at most stopWait: stopped, it
// can neither fork a child nor reap one while its children are looked for (there is
// no children file in every kernel: /proc is scanned for their parent pid), so each
// pid found is still that child's when it is opened as a pidfd and then signalled.
// p itself is signalled through its own pidfd ([os.Process]): once reaped, it is
// left alone. A p that does not stop in time is killed, with its group, but no
// child is looked for.
func KillLauncher(p *os.Process, stopWait time.Duration) error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return nil
		}
		return err
	}
	stopped := waitStopped(p.Pid, stopWait)
	if stopped {
		killChildren(p)
	}
	// The group's id is p's pid, taken while p is not reaped (stopped, it is not) or
	// while any member lives.
	if stopped || p.Signal(syscall.Signal(0)) == nil {
		_ = KillGroup(p.Pid, syscall.SIGKILL) // ESRCH: nothing left in it
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// killChildren SIGKILLs the children of p, which is stopped.
func killChildren(p *os.Process) {
	var kids []*os.Process
	for _, pid := range childrenOf(p.Pid) {
		if k, err := os.FindProcess(pid); err == nil { // a pidfd on Linux
			kids = append(kids, k)
		}
	}
	// Still not reaped now, p held every pid read above: they were its children when
	// opened, not pids reused since.
	if p.Signal(syscall.Signal(0)) == nil {
		for _, k := range kids {
			_ = k.Kill()
		}
	}
	for _, k := range kids {
		_ = k.Release()
	}
}

// waitStopped waits up to d for process pid to be stopped; false when it is not
// (still running, or gone).
func waitStopped(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 10*time.Millisecond) {
		switch procState(pid) {
		case 'T', 't':
			return true
		case 0, 'Z', 'X':
			return false
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
	}
}

// procStat is the fields of /proc/PID/stat after the command name, from the state
// (field 3) on; nil when there is no such process.
func procStat(pid int) []string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:] // the command name may hold spaces and parentheses
	}
	return strings.Fields(s)
}

// procState is the state letter of process pid (R, S, D, T, Z…), 0 when there is
// no such process.
func procState(pid int) byte {
	f := procStat(pid)
	if len(f) < 1 || f[0] == "" {
		return 0
	}
	return f[0][0]
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil || c == pid {
			continue
		}
		if f := procStat(c); len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, c)
		}
	}
	return kids
}
