package sandboxinit

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// HoldMain is `internal hold`: process 1 of a Kubernetes Pod that the kubernetes
// placement (placement/kubernetes) created and whose control channel has not reached
// it yet. It holds nothing and runs nothing: it makes itself non-dumpable, keeps no
// inherited descriptor beyond stdio, reaps whatever is reparented to it, and exits 0
// on SIGTERM or SIGINT (the kubelet's stop). Signals a process in the Pod could use to
// make it dump its stacks are ignored.
//
// It is the placeholder for the Pod's real process 1, `internal init` with its spec
// and control channel delivered through the API server, which the placement does not
// make yet (docs/kubernetes.md): it proves that the Pod runs cordon's binary as
// process 1 under the posture the placement compiles.
func HoldMain([]string) int {
	if err := linux.SetDumpable(false); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal hold: %v\n", err)
		return 1
	}
	if err := linux.CloseOnExecFrom(3); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal hold: %v\n", err)
		return 1
	}
	ignoreSignals()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go reapForever()
	fmt.Fprintln(os.Stderr, "cordon: process 1 holding: no control channel yet")
	<-stop
	return 0
}

// reapForever reaps every child process 1 adopts: on each SIGCHLD (subscribed before
// the first reap, so none is missed), every child that has exited.
func reapForever() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	for {
		for {
			var ws syscall.WaitStatus
			pid, err := linux.WaitAny(&ws, syscall.WNOHANG)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
		}
		<-sig
	}
}

// InstallMain is `internal install DEST`: it copies this binary to DEST (which must not
// exist; mode 0555). The kubernetes placement runs it in an init container from
// cordon's own image, so that process 1 of a Pod is cordon's binary whatever the
// workload's image holds, as the local backends mount it read-only into every sandbox.
func InstallMain(args []string) int {
	if len(args) != 1 || !filepath.IsAbs(args[0]) {
		fmt.Fprintln(os.Stderr, "usage: cordon internal install /ABSOLUTE/DEST")
		return 2
	}
	if err := install(args[0]); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: internal install: %v\n", err)
		return 1
	}
	return 0
}

func install(dest string) error {
	src, err := os.Open("/proc/self/exe")
	if err != nil {
		return fmt.Errorf("opening this binary: %w", err)
	}
	defer src.Close()
	out, err := os.OpenFile(dest, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o555)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, src); err != nil {
		out.Close()
		return fmt.Errorf("copying to %s: %w", dest, err)
	}
	return out.Close()
}
