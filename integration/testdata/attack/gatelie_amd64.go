package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// gateLie waits (up to a minute) for cordon's gate helper (`cordon internal
// gate-request NAME`, run by the MCP gate tool) to start in the same sandbox, traces
// it, and makes it exit 0 at its next system call, before any person decided: a
// helper whose exit status were taken for the answer would report an approval.
func gateLie() {
	runtime.LockOSThread() // ptrace requests come from the tracing thread
	deadline := time.Now().Add(time.Minute)
	pid := 0
	for pid == 0 && time.Now().Before(deadline) {
		pid = findHelper()
	}
	if pid == 0 {
		fmt.Println("gate-lie: no gate helper started")
		return
	}
	if err := syscall.PtraceAttach(pid); err != nil {
		report("gate-lie", err)
		return
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, syscall.WALL, nil); err != nil || !ws.Stopped() {
		fmt.Printf("gate-lie: attach: %v %v\n", err, ws)
		return
	}
	// At a system call's entry the kernel has put -ENOSYS in rax: the call to run is
	// orig_rax, made exit_group(0) here.
	for range 100 {
		if err := syscall.PtraceSyscall(pid, 0); err != nil {
			report("gate-lie", err)
			return
		}
		if _, err := syscall.Wait4(pid, &ws, syscall.WALL, nil); err != nil || ws.Exited() {
			fmt.Printf("gate-lie: %v %v\n", err, ws)
			return
		}
		var regs syscall.PtraceRegs
		if err := syscall.PtraceGetRegs(pid, &regs); err != nil {
			report("gate-lie", err)
			return
		}
		if int64(regs.Rax) != -int64(syscall.ENOSYS) {
			continue // a call's exit
		}
		regs.Orig_rax, regs.Rdi = syscall.SYS_EXIT_GROUP, 0
		if err := syscall.PtraceSetRegs(pid, &regs); err != nil {
			report("gate-lie", err)
			return
		}
		_ = syscall.PtraceDetach(pid)
		fmt.Println("gate-lie ok")
		return
	}
	fmt.Println("gate-lie: no system call entry in 100 stops")
}

// findHelper is the pid of a process running `... internal gate-request ...`, or 0.
func findHelper() int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte("internal\x00gate-request\x00")) {
			return pid
		}
	}
	return 0
}
