package pid1

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"golang.org/x/net/bpf"

	"github.com/cordonhq/cordon/egress/bridge"
	"github.com/cordonhq/cordon/internal/ctl"
	"github.com/cordonhq/cordon/internal/linux"
)

// Main is the body of `cordon internal init`. It never returns normally: it exits with
// the command's status.
func Main() int {
	// Before it holds anything: a process that is not dumpable cannot be ptraced, and
	// its /proc/1/fd, mem and environ stay closed, to commands that share its uid.
	if err := linux.SetDumpable(false); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return ExitSelfCheck
	}
	// Nothing process 1 inherited beyond stdio reaches a command.
	if err := linux.CloseOnExecFrom(3); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		return ExitSelfCheck
	}
	status, specFile := channels() // fds 3 and 4, or the files of --dir (files_linux.go)
	if status == nil || specFile == nil {
		fmt.Fprintln(os.Stderr, "cordon: internal init must be started by cordon")
		return ExitSelfCheck
	}
	// What needs no spec (the self-check's part, the seccomp filter) is done while the
	// host sends it.
	pre, filter := startPrecheck(), startSeccomp()
	spec, err := readSpec(specFile)
	if err == nil && len(spec.Argv) == 0 && spec.Serve == nil {
		err = errors.New("empty command")
	}
	var k *confiner
	if err == nil {
		k, err = checkAndConfine(&spec, pre, filter)
	}
	if err == nil && spec.Bridge != nil {
		err = startBridge(spec.Bridge)
	}
	var ctlConn *ctl.Conn
	if err == nil && spec.Serve != nil {
		// Dial before reporting: the host accepts this one connection, then stops
		// listening, before any command exists that could dial instead.
		ctlConn, err = dialControl(spec.Serve)
	}
	if !report(status, err) {
		return ExitSelfCheck
	}
	if ctlConn != nil {
		return serve(ctlConn, k)
	}
	return run(&spec, k)
}

// checkAndConfine finishes the self-check (pre is its part that needed no spec, started
// before the spec was read) and builds the confiner (the Landlock ruleset; filter is the
// seccomp program, compiled meanwhile too) side by side: they are independent, and both
// are on the path of every start. Nothing runs before both are done; the self-check's
// error wins.
func checkAndConfine(spec *Spec, pre func() ([]linux.MountInfo, error), filter func() ([]bpf.RawInstruction, error)) (*confiner, error) {
	type built struct {
		k   *confiner
		err error
	}
	ch := make(chan built, 1)
	go func() {
		self, c := confinement(spec)
		k, err := newConfiner(self, c, filter)
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
func run(spec *Spec, k *confiner) int {
	ignoreSignals()
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGWINCH, syscall.SIGCONT)
	path, err := exec.LookPath(spec.Argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "cordon: %s: command not found in the sandbox\n", spec.Argv[0])
		return ExitNotFound
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
			return ExitNotFound
		}
		return ExitNotExecutable
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
			return ExitSelfCheck
		}
		if wpid != pid {
			continue // an orphan reparented to us: reaped
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// startBridge listens before the command starts, so its first connection cannot race
// the bridge, and relays in the background until pid1 exits.
func startBridge(b *Bridge) error {
	ln, err := net.Listen("tcp", b.Listen)
	if err != nil {
		return fmt.Errorf("egress bridge: %w", err)
	}
	go func() { _ = bridge.Run(context.Background(), ln, b.Socket) }()
	return nil
}

// confinement is this binary (the trampoline every command starts through) and what
// commands are confined to.
func confinement(spec *Spec) (self string, c Confine) {
	self, err := os.Executable()
	if err != nil {
		self = "/proc/self/exe"
	}
	read, list := carve(append(append([]string(nil), confineRead...), spec.Read...), spec.Hide)
	return self, Confine{Read: read, Write: spec.Write, List: list, Landlock: linux.LandlockABI() > 0}
}
