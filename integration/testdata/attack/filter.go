package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// opens runs the steps given as arguments, in order, each one the monitor's path filter
// must not mistake for an allowed open (red_filter_test.go):
//
//	r:PATH w:PATH W:PATH p:PATH  open read-only, write (O_CREAT), O_RDWR, O_PATH
//	cd:DIR                       chdir, for the relative paths after it
//	dir:DIR                      open DIR as the dirfd of the relative paths after it
//	ln:TARGET:LINK  hl:TARGET:LINK  a symlink, a hard link
//	mv:OLD:NEW                   rename (the dirfd stays open)
//	inroot:DIR:PATH              openat2(DIR, PATH, O_WRONLY|O_CREAT, RESOLVE_IN_ROOT)
//	reopen:PATH                  open PATH with O_PATH, then /proc/self/fd/N for O_RDWR
//	dropped:N:PATH               N reads of PATH from a page another thread keeps dropping
//	pidroot:PATH                 read /proc/<own pid>/root/PATH
//	taskroot:PATH                read /proc/self/task/<own tid>/root/PATH
func opens() {
	dirfd := -100 // AT_FDCWD
	for _, step := range os.Args[2:] {
		op, arg, _ := strings.Cut(step, ":")
		var err error
		switch op {
		case "r", "w", "W", "p":
			flags := map[string]int{"r": syscall.O_RDONLY, "w": syscall.O_WRONLY | syscall.O_CREAT,
				"W": syscall.O_RDWR, "p": 0o10000000}[op]
			err = openClose(dirfd, arg, flags)
		case "cd":
			err = os.Chdir(arg)
		case "dir":
			var fd int
			fd, err = syscall.Open(arg, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
			if err == nil {
				dirfd = fd
			}
		case "ln", "hl", "mv":
			a, b, _ := strings.Cut(arg, ":")
			err = map[string]func(string, string) error{"ln": os.Symlink, "hl": os.Link, "mv": os.Rename}[op](a, b)
		case "inroot":
			dir, p, _ := strings.Cut(arg, ":")
			err = openat2InRoot(dir, p)
		case "reopen":
			var fd int
			if fd, err = syscall.Open(arg, 0o10000000, 0); err == nil {
				err = openClose(-100, fmt.Sprintf("/proc/self/fd/%d", fd), syscall.O_RDWR)
				syscall.Close(fd)
			}
		case "dropped":
			n, p, _ := strings.Cut(arg, ":")
			err = droppedOpens(n, p)
		case "pidroot":
			err = openClose(-100, fmt.Sprintf("/proc/%d/root%s", os.Getpid(), arg), syscall.O_RDONLY)
		case "taskroot":
			err = openClose(-100, fmt.Sprintf("/proc/self/task/%d/root%s", syscall.Gettid(), arg), syscall.O_RDONLY)
		default:
			err = fmt.Errorf("unknown step")
		}
		report(step, err)
	}
}

func openClose(dirfd int, path string, flags int) error {
	fd, err := syscall.Openat(dirfd, path, flags|syscall.O_CLOEXEC, 0o644)
	if err == nil {
		syscall.Close(fd)
	}
	return err
}

// openat2InRoot opens path for writing with RESOLVE_IN_ROOT: an absolute path is then
// resolved below dir, not below "/".
func openat2InRoot(dir, path string) error {
	dfd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(dfd)
	how := struct{ flags, mode, resolve uint64 }{syscall.O_WRONLY | syscall.O_CREAT | syscall.O_CLOEXEC, 0o644, 0x10}
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return err
	}
	fd, _, e := syscall.Syscall6(437 /* openat2 */, uintptr(dfd), uintptr(unsafe.Pointer(p)),
		uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
	if e != 0 {
		return e
	}
	syscall.Close(int(fd))
	return nil
}

// droppedOpens opens path n times read-only from a page of a file mapping that another
// thread drops (MADV_DONTNEED) again and again: some opens find it gone by their exit,
// after the kernel read it, where the monitor reads a path it could not read at entry.
func droppedOpens(n, path string) error {
	tries, err := strconv.Atoi(n)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(".", "pathpage-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := make([]byte, os.Getpagesize())
	copy(page, path)
	if _, err := f.Write(page); err != nil {
		return err
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, len(page), syscall.PROT_READ, syscall.MAP_PRIVATE)
	if err != nil {
		return err
	}
	defer syscall.Munmap(b)
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		for !stop.Load() {
			syscall.Madvise(b, syscall.MADV_DONTNEED)
		}
	}()
	for i := 0; i < tries; i++ {
		syscall.Madvise(b, syscall.MADV_DONTNEED)
		fd, _, e := syscall.Syscall6(syscall.SYS_OPENAT, ^uintptr(99), uintptr(unsafe.Pointer(&b[0])), syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
		if e == 0 {
			syscall.Close(int(fd))
		}
	}
	stop.Store(true)
	<-done
	return nil
}
