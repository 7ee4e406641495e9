package sandboxinit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// runInEmptyNetns is a Pod's process 1 once its arguments are checked: it starts
// this binary with args in a new user namespace owning a new network namespace
// ([linux.EmptyNetnsAttr]: the Pod's uid and gid mapped to themselves, nothing else),
// forwards it every signal it can catch, and when it exits kills the rest of the Pod
// (as process 1 only can) and exits with its status.
//
// It makes itself non-dumpable only once the child runs: until the child's exec the
// child is its copy, and a non-dumpable one's uid_map is root's to write, not ours.
// Nothing but cordon runs in the Pod yet (the init container has ended).
func runInEmptyNetns(args []string) int {
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = linux.EmptyNetnsAttr()
	linux.UnignoreSignals()
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals()...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: starting the Pod's init in an empty network namespace: %v\n", err)
		return wire.ExitSelfCheck
	}
	if err := linux.SetDumpable(false); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal init: %v\n", err)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return wire.ExitSelfCheck
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	killSandbox()
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		fmt.Fprintf(os.Stderr, "cordon: internal init: waiting for the Pod's init: %v\n", err)
		return wire.ExitSelfCheck
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return errdefs.WaitCode(ws)
}

// forwardedSignals are the signals process 1 catches to forward: all but those the
// kernel or Go's runtime keep (SIGKILL, SIGSTOP, SIGCHLD, SIGURG, SIGPROF).
func forwardedSignals() []os.Signal {
	var all []os.Signal
	for s := syscall.Signal(1); s < 32; s++ {
		switch s {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPROF:
			continue
		}
		all = append(all, s)
	}
	return all
}

// enterEmptyNetns is the inner init's first step, in the network namespace
// [runInEmptyNetns] made: it checks it has loopback only, brings loopback up, and
// gives up every capability it holds there, for good (the self-check then finds
// none), then becomes the subreaper of the commands it will start.
func enterEmptyNetns() error {
	if err := loopbackOnly(); err != nil {
		return fmt.Errorf("the new network namespace: %w", err)
	}
	if err := linux.LoopbackUp(); err != nil {
		return err
	}
	if err := linux.DropAllCaps(); err != nil {
		return err
	}
	return linux.SetChildSubreaper()
}
