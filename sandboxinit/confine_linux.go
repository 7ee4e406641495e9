package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/net/bpf"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/seccomp"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// joinFD is the command cgroup's cgroup.procs in the join trampoline.
const joinFD = 3

// Paths every sandbox has that the Landlock ruleset adds to the Plan's.
var (
	confineRead    = []string{"/proc", paths.SandboxDir}
	confineDevices = []string{"/dev"}
	confineList    = []string{"/"}
)

// confineRules is the Landlock ruleset for c.
func confineRules(c wire.Confine) linux.FSRules {
	return linux.FSRules{
		Read:    c.Read,
		Write:   c.Write,
		Devices: confineDevices,
		List:    append(append([]string(nil), confineList...), c.List...),
	}
}

// carve turns read into paths that cover the same trees except every path in hide:
// a read path above a hidden one is replaced by its entries other than the one on
// the way down, level by level, and becomes list-only itself. Landlock only grants,
// so this is how a tree is granted with a hole in it (the files protocol's FIFOs
// under /run/cordon: a command holding the status FIFO open would keep process 1
// from noticing that cordon died). It reads directories once, at process 1's start;
// entries created later are not granted.
func carve(read, hide []string) (out, list []string) {
	for _, r := range read {
		out, list = carveOne(r, hide, out, list)
	}
	return out, list
}

func carveOne(r string, hide []string, out, list []string) ([]string, []string) {
	var below []string
	for _, h := range hide {
		if h == r {
			return out, list // hidden whole
		}
		if within(h, r) {
			below = append(below, h)
		}
	}
	if len(below) == 0 {
		return append(out, r), list
	}
	entries, err := os.ReadDir(r)
	if err != nil {
		return out, list
	}
	list = append(list, r)
	for _, e := range entries {
		out, list = carveOne(filepath.Join(r, e.Name()), below, out, list)
	}
	return out, list
}

// within reports whether p lies strictly below dir.
func within(p, dir string) bool {
	return strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// confiner starts commands confined: Landlock (a ruleset built once, a new domain for
// each command) and the seccomp filter (compiled once), applied to a fresh OS thread
// of process 1 that forks the command and then dies. The command inherits both from
// its first instruction, and no re-exec of a trampoline is paid for it (a Go binary
// starts in several milliseconds; the two layers cost microseconds). Process 1's
// other threads stay unconfined.
type confiner struct {
	self     string // this binary, the join-cgroup trampoline
	rs       *linux.Ruleset
	prog     []bpf.RawInstruction
	landlock bool
	// barrier is the barrier filter's program when the spec asks for it (compiled
	// with the rest, beside the self-check); forks, once prepareBarrier has run, is
	// the thread the command is forked from, confined and carrying it: it takes one
	// fork and dies.
	barrier []bpf.RawInstruction
	forks   chan forkRequest
}

// forkRequest is a fork the barrier's thread makes, and where it answers.
type forkRequest struct {
	path  string
	argv  []string
	attr  *syscall.ProcAttr
	procs *os.File
	done  chan forkResult
}

type forkResult struct {
	pid int
	err error
}

// newConfiner builds the Landlock ruleset for c, and the barrier's program when
// barrier is set; filter is the seccomp program's (see [startSeccomp]).
func newConfiner(self string, c wire.Confine, filter func() ([]bpf.RawInstruction, error), barrier bool) (*confiner, error) {
	k := &confiner{self: self, landlock: c.Landlock}
	if c.Landlock {
		rs, err := linux.NewRuleset(confineRules(c))
		if err != nil {
			return nil, err
		}
		k.rs = rs
	}
	if barrier {
		arch, err := seccomp.Native()
		if err == nil {
			k.barrier, err = seccomp.BarrierProgram(arch)
		}
		if err != nil {
			return nil, fmt.Errorf("barrier: %w", err)
		}
	}
	prog, err := filter()
	if err != nil {
		return nil, err
	}
	k.prog = prog
	return k, nil
}

// startSeccomp compiles the seccomp filter in the background: it is the same for every
// command and needs nothing of the spec (about a millisecond of process 1's start here),
// so process 1 compiles it while the host sends the spec. wait returns it.
func startSeccomp() (wait func() ([]bpf.RawInstruction, error)) {
	type result struct {
		prog []bpf.RawInstruction
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		arch, err := seccomp.Native()
		var prog []bpf.RawInstruction
		if err == nil {
			prog, err = seccomp.Program(arch)
		}
		if err != nil {
			err = fmt.Errorf("seccomp: %w", err)
		}
		ch <- result{prog, err}
	}()
	var once sync.Once
	var r result
	return func() ([]bpf.RawInstruction, error) {
		once.Do(func() { r = <-ch })
		return r.prog, r.err
	}
}

// start forks path as the command, confined, in its own process group as attr says.
// With a cgroup (attr.Sys.UseCgroupFD, and procs its cgroup.procs opened for
// writing) it is cloned straight into it, or where clone3 is refused (the engines'
// profiles make it ENOSYS) it starts as `internal join-cgroup`, which moves itself
// there before it execs the command: nothing the command runs is ever outside.
func (k *confiner) start(path string, argv []string, attr *syscall.ProcAttr, procs *os.File) (int, error) {
	if k.forks != nil {
		// The barrier's thread, confined already: it forks this one command.
		req := forkRequest{path: path, argv: argv, attr: attr, procs: procs, done: make(chan forkResult, 1)}
		k.forks <- req
		k.forks = nil
		r := <-req.done
		return r.pid, r.err
	}
	var pid int
	err := linux.OnOwnThread(func() error {
		if err := k.confineThread(); err != nil {
			return err
		}
		var err error
		pid, err = k.fork(path, argv, attr, procs)
		return err
	})
	return pid, err
}

// fork forks path from the calling thread, confined already (see start).
func (k *confiner) fork(path string, argv []string, attr *syscall.ProcAttr, procs *os.File) (int, error) {
	pid, err := linux.ForkExec(path, argv, attr)
	if errors.Is(err, syscall.ENOSYS) && attr.Sys.UseCgroupFD && procs == nil {
		err = errors.New("clone3 is refused and the command's cgroup cannot be joined")
	}
	if errors.Is(err, syscall.ENOSYS) && attr.Sys.UseCgroupFD && procs != nil {
		join := *attr
		sys := *attr.Sys
		sys.UseCgroupFD = false
		join.Sys = &sys
		join.Files = append(append([]uintptr(nil), attr.Files...), procs.Fd()) // fd 3
		pid, err = linux.ForkExec(k.self, append([]string{k.self, "internal", wire.JoinArg, path}, argv...), &join)
	}
	return pid, err
}

// prepareBarrier confines a thread of its own now, as start would, and loads the
// barrier filter (internal/seccomp.Barrier) on it too, with a listener, which it
// returns: the caller hands it to the host and keeps no copy. The thread then waits
// for start's one fork, and dies: the command and all it starts carry the barrier, and
// no other thread of process 1 does. Should the fork never come, the thread waits
// until process 1 exits.
func (k *confiner) prepareBarrier() (*os.File, error) {
	prog := k.barrier
	if prog == nil {
		return nil, errors.New("barrier: no program")
	}
	// A crashing process's core file is written by the kernel into its working
	// directory (core_pattern "core", the default; or by a helper that honours the
	// limit), replacing any file of that name, with no call the barrier could hold:
	// before the baseline has read it, that file would be missing from the diff. The
	// command, which has no CAP_SYS_RESOURCE, cannot raise the limit again.
	if err := linux.NoCoreDumps(); err != nil {
		return nil, fmt.Errorf("barrier: no core dumps: %w", err)
	}
	type loaded struct {
		l   *os.File
		err error
	}
	ready := make(chan loaded, 1)
	forks := make(chan forkRequest, 1)
	go func() {
		_ = linux.OnOwnThread(func() error {
			if err := k.confineThread(); err != nil {
				ready <- loaded{nil, err}
				return nil
			}
			l, err := linux.LoadSeccompListenerThread(prog)
			if err != nil {
				ready <- loaded{nil, fmt.Errorf("barrier: %w", err)}
				return nil
			}
			ready <- loaded{l, nil}
			req := <-forks
			pid, err := k.fork(req.path, req.argv, req.attr, req.procs)
			req.done <- forkResult{pid, err}
			return nil
		})
	}()
	r := <-ready
	if r.err != nil {
		return nil, r.err
	}
	k.forks = forks
	return r.l, nil
}

func (k *confiner) confineThread() error {
	if k.landlock {
		if err := k.rs.RestrictThread(); err != nil {
			return err
		}
	}
	if err := linux.LoadSeccompThread(k.prog); err != nil {
		return fmt.Errorf("seccomp: %w", err)
	}
	return nil
}

// JoinMain is `internal join-cgroup PATH ARGV...`, with the command's cgroup.procs
// open for writing as fd 3. It runs confined already (it was forked from a confined
// thread). It returns only on failure, with the status a command that could not start
// gets: the command never runs outside its cgroup.
func JoinMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "cordon: internal join-cgroup: for cordon's own use only")
		return wire.ExitNotExecutable
	}
	if err := linux.JoinCgroupProcs(joinFD); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: joining the command's cgroup: %v\n", args[1], err)
		return wire.ExitNotExecutable
	}
	if err := linux.CloseFrom(joinFD); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", args[1], err)
		return wire.ExitNotExecutable
	}
	err := linux.Exec(args[0], args[1:], os.Environ())
	fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", args[1], err)
	if errors.Is(err, syscall.ENOENT) {
		return wire.ExitNotFound
	}
	return wire.ExitNotExecutable
}
