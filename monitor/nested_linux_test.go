package monitor

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// initThreads is process 1 of a nested sandbox whose calls come from several threads
// at once, as a Go init's do (its goroutines run on whichever thread is free): each of
// four goroutines, locked to a thread of its own while the others are, dials the
// control socket and opens /etc/shadow. Then it runs args, the workload.
func initThreads(args []string) {
	const threads = 4
	var locked, done sync.WaitGroup
	locked.Add(threads)
	done.Add(threads)
	for i := 0; i < threads; i++ {
		go func() {
			defer done.Done()
			runtime.LockOSThread() // the thread is not reused: it ends with the goroutine
			locked.Done()
			locked.Wait() // every goroutine holds a thread: at most one is the main one
			if c, err := net.DialTimeout("unix", ControlSocket, 200*time.Millisecond); err == nil {
				c.Close()
			}
			linux.ProbeOpen("/etc/shadow", syscall.O_RDONLY)
		}()
	}
	done.Wait()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
	}
}

// TestNestedInitUnwatchedOnEveryThread: process 1 of a nested sandbox is machinery on
// every thread, not only on the one whose thread id is 1: cordon's init dials the
// control socket from whichever thread its goroutine runs on, and that connect, which
// the profile no longer allows anyone, must not be an alert. The workload's own connect
// there is one, with its own category.
func TestNestedInitUnwatchedOnEveryThread(t *testing.T) {
	testutil.RequireBwrap(t)
	args := nestedInitArgs("/usr/bin/python3", "-c",
		"import socket; socket.socket(socket.AF_UNIX).connect_ex('"+ControlSocket+"')")
	prof := hostProfile()
	prof.Paths = append(prof.Paths, PathRule{Path: "/run/cordon", Access: contract.ReadOnly, Why: "init"})
	h := newHarness(t, prof, Options{Nested: true})
	h.run(append(os.Environ(), helperEnv+"=init-threads"), "/usr/bin/bwrap", args...)
	alerts, records := h.got()
	var workload int
	for _, a := range alerts {
		switch {
		case a.Comm == "cordon":
			t.Errorf("process 1 is watched on one of its threads: %s", a)
		case a.Comm == "python3" && a.Category == CatConnectControl:
			workload++
		case a.Comm == "python3" && a.Rule == RuleExec:
		default:
			t.Errorf("unexpected alert: %s", a)
		}
	}
	if workload != 1 {
		t.Errorf("%d alerts for the workload's connect to the control socket; want 1 (%d records)", workload, len(records))
	}
}
