package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// freshPath returns path NUL-terminated on a page of a new file mapping that nothing
// has touched yet: at the syscall's entry the monitor cannot read it (BPF may not
// fault), so the call waits in the monitor's shared pending table until its exit.
func freshPath(path string) uintptr {
	f, err := os.CreateTemp(".", "pathpage-")
	if err != nil {
		panic(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, os.Getpagesize())
	copy(page, path)
	if _, err := f.Write(page); err != nil {
		panic(err)
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, len(page), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		panic(err)
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

// pendingFill fills the monitor's pending table: N threads (one per goroutine blocked
// in a syscall) each block in an open of a FIFO whose name is on an untouched page,
// for SECONDS, and print "filled" once they are all in.
func pendingFill() {
	n, _ := strconv.Atoi(os.Args[2])
	secs, _ := strconv.Atoi(os.Args[3])
	if err := syscall.Mkfifo("fifo", 0o600); err != nil && err != syscall.EEXIST {
		panic(err)
	}
	ptrs := make([]uintptr, n)
	for i := range ptrs {
		ptrs[i] = freshPath("fifo")
	}
	var started sync.WaitGroup
	started.Add(n)
	for _, p := range ptrs {
		go func(p uintptr) {
			started.Done()
			syscall.Syscall6(syscall.SYS_OPENAT, uintptr(^uint(99)), p, syscall.O_RDONLY, 0, 0, 0) // AT_FDCWD
		}(p)
	}
	started.Wait()
	// Filled once every one of them is in its open (the table's entry is made at the
	// call's entry): there are as many threads, and as many of them are blocked in
	// openat (read only then: each look is an open per thread).
	for !allInOpen(n) {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("filled")
	time.Sleep(time.Duration(secs) * time.Second)
	os.Exit(0)
}

// freshOpen opens PATH read-only with the name on an untouched page.
func freshOpen() {
	p := freshPath(os.Args[2])
	_, _, e := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(^uint(99)), p, syscall.O_RDONLY, 0, 0, 0)
	report("open "+os.Args[2], errnoErr(e))
}

func errnoErr(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

// allInOpen reports whether n of this process's threads are blocked in openat.
func allInOpen(n int) bool {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		panic(err)
	}
	if len(tasks) < n {
		return false
	}
	prefix := strconv.Itoa(syscall.SYS_OPENAT) + " "
	in := 0
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/syscall")
		if err == nil && strings.HasPrefix(string(b), prefix) {
			in++
		}
	}
	return in >= n
}
