//go:build linux || darwin

package sandboxinit

import (
	"os/signal"
	"syscall"
)

// ignoreSignals makes process 1 deaf to every signal that would otherwise end it or
// make it dump its stacks: commands share its uid and may send any of them. The
// kernel already keeps SIGKILL and SIGSTOP from a namespace's own processes away from
// its process 1; the host ends it from outside (hang-up, engine kill, pid namespace
// teardown). SIGCHLD (reaping), SIGURG (the Go scheduler's preemption) and SIGPROF
// stay with the runtime; callers Notify what they forward afterwards.
func ignoreSignals() {
	for s := syscall.Signal(1); s < 32; s++ {
		switch s {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPROF:
			continue
		}
		signal.Ignore(s)
	}
}
