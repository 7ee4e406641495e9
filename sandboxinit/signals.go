//go:build linux || darwin

package sandboxinit

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// ignoreSignals makes process 1 deaf to every signal that would otherwise end it or
// make it dump its stacks: commands share its uid and may send any of them. The
// kernel already keeps SIGKILL and SIGSTOP from a namespace's own processes away from
// its process 1; the host ends it from outside (hang-up, engine kill, pid namespace
// teardown). SIGCHLD (reaping), SIGURG (the Go scheduler's preemption) and SIGPROF
// stay with the runtime; callers Notify what they forward afterwards.
//
// They are caught and dropped, not ignored: a signal ignored stays ignored across exec,
// so every command would start with SIGPIPE, SIGALRM and the rest ignored (`yes | head`
// would see EPIPE, not die of SIGPIPE). A caught one is reset to its default in a child.
// What process 1 inherited ignored (its ancestors' choice) is set back to the default
// first, for the same reason: the signals Go will not catch (32 and up) included.
func ignoreSignals() {
	linux.UnignoreSignals()
	var all []os.Signal
	for s := syscall.Signal(1); s < 32; s++ {
		switch s {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGPROF:
			continue
		}
		all = append(all, s)
	}
	dropped := make(chan os.Signal, 16)
	signal.Notify(dropped, all...)
	go func() {
		for range dropped {
		}
	}()
}
