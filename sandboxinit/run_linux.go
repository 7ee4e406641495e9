package sandboxinit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/net/bpf"

	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// Main is the body of `cordon internal init`. It never returns normally: it exits with
// the command's status.
func Main() int {
	began := time.Now()
	// Before it holds anything: a process that is not dumpable cannot be ptraced, and
	// its /proc/1/fd, mem and environ stay closed, to commands that share its uid.
	if err := linux.SetDumpable(false); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return wire.ExitSelfCheck
	}
	// Nothing process 1 inherited beyond stdio reaches a command.
	if err := linux.CloseOnExecFrom(3); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return wire.ExitSelfCheck
	}
	status, specFile := channels() // fds 3 and 4, or the files of --dir (files_linux.go)
	if status == nil || specFile == nil {
		fmt.Fprintln(os.Stderr, "cordon: internal init must be started by cordon")
		return wire.ExitSelfCheck
	}
	// What needs no spec (the self-check's part, the seccomp filter) is done while the
	// host sends it.
	pre, filter := startPrecheck(), startSeccomp()
	spec, err := readSpec(specFile)
	tm := startTimes(spec.Trace, began)
	switch {
	case err != nil:
	case len(spec.Argv) == 0 && !spec.Serve:
		err = errors.New("empty command")
	case spec.Serve && spec.Control == nil:
		err = errors.New("a session without a control channel")
	case spec.Egress != "" && spec.Control == nil:
		err = errors.New("an egress listener with no control channel to hand it over on")
	case spec.Barrier && (spec.Control == nil || spec.Serve):
		err = errors.New("a barrier outside a one-command run with a control channel")
	}
	var k *confiner
	if err == nil {
		k, err = checkAndConfine(&spec, pre, filter)
	}
	tm.checked()
	var barrier *os.File
	if err == nil && spec.Barrier {
		barrier, err = k.prepareBarrier()
	}
	var ctlConn *ctl.Conn
	if err == nil && spec.Control != nil {
		// Dial before reporting: the host accepts this one connection, then stops
		// listening, before any command exists that could dial instead.
		ctlConn, err = handOver(&spec, barrier)
		tm.dialed()
	}
	if !report(status, err, tm.report()) {
		return wire.ExitSelfCheck
	}
	if spec.Serve {
		return serve(ctlConn, k)
	}
	if ctlConn != nil {
		ctlConn.Close()
	}
	return run(&spec, k)
}

// checkAndConfine finishes the self-check (pre is its part that needed no spec, started
// before the spec was read) and builds the confiner (the Landlock ruleset; filter is the
// seccomp program, compiled meanwhile too) side by side: they are independent, and both
// are on the path of every start. Nothing runs before both are done; the self-check's
// error wins.
func checkAndConfine(spec *wire.Spec, pre func() ([]linux.MountInfo, error), filter func() ([]bpf.RawInstruction, error)) (*confiner, error) {
	type built struct {
		k   *confiner
		err error
	}
	ch := make(chan built, 1)
	go func() {
		self, c := confinement(spec)
		k, err := newConfiner(self, c, filter, spec.Barrier)
		ch <- built{k, err}
	}()
	mounts, cerr := pre()
	if cerr == nil {
		cerr = specCheck(spec, mounts)
	}
	b := <-ch
	if cerr != nil {
		return nil, cerr
	}
	return b.k, b.err
}

// run starts the command, forwards signals to it and reaps every child until it exits.
func run(spec *wire.Spec, k *confiner) int {
	ignoreSignals()
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT)
	path, err := exec.LookPath(spec.Argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: command not found in the sandbox\n", spec.Argv[0])
		return wire.ExitNotFound
	}
	pid, err := k.start(path, spec.Argv, &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	}, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: %v\n", spec.Argv[0], err)
		if errors.Is(err, syscall.ENOENT) {
			return wire.ExitNotFound
		}
		return wire.ExitNotExecutable
	}
	go func() {
		for s := range sigs {
			// Signal the command's whole process group, as a terminal would.
			_ = linux.KillGroup(pid, s.(syscall.Signal))
		}
	}()
	for {
		var ws syscall.WaitStatus
		wpid, err := linux.WaitAny(&ws, 0)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return wire.ExitSelfCheck
		}
		if wpid != pid {
			continue // an orphan reparented to us: reaped
		}
		return errdefs.WaitCode(ws)
	}
}

// handOver dials the host's control channel and, when the spec asks for egress, hands
// it the listening TCP socket of the sandbox's proxy clients: created here, inside the
// sandbox's network namespace, before any command exists (so none can reach it while
// process 1 holds it), and closed here before the host's ready, so that from then on
// only cordon holds it. Connections made before the proxy accepts wait in its backlog.
// barrier, when set, is the barrier filter's listener, handed over after it and
// closed the same way: no process of the sandbox holds it.
func handOver(spec *wire.Spec, barrier *os.File) (*ctl.Conn, error) {
	var files []*os.File
	if spec.Egress != "" {
		ln, err := listenEgress(spec.Egress)
		if err != nil {
			if barrier != nil {
				barrier.Close()
			}
			return nil, err
		}
		files = append(files, ln)
	}
	if barrier != nil {
		files = append(files, barrier)
	}
	return dialControl(spec.Control, files...) // closes them once they are sent
}

// listenEgress listens on addr (TCP, in this network namespace) and returns the
// listening socket as a file, its only descriptor.
func listenEgress(addr string) (*os.File, error) {
	// Plain TCP: Go listens with MPTCP by default where the kernel has it, and the
	// host accepts IPPROTO_TCP only.
	var lc net.ListenConfig
	lc.SetMultipathTCP(false)
	ln, err := lc.Listen(context.Background(), "tcp4", addr)
	if err != nil {
		return nil, fmt.Errorf("egress listener: %w", err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, fmt.Errorf("egress listener: %w", err)
	}
	return f, nil
}

// confinement is this binary (the join-cgroup trampoline, used where clone3 into a
// command's cgroup is refused) and what commands are confined to.
func confinement(spec *wire.Spec) (self string, c wire.Confine) {
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	read, list := carve(append(append([]string(nil), confineRead...), spec.Read...), spec.Hide)
	return self, wire.Confine{Read: read, Write: spec.Write, List: list, Landlock: linux.LandlockABI() > 0}
}
