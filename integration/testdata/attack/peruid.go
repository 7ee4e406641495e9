package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

// inotifyHog takes every inotify instance the kernel lets its host uid have
// (fs.inotify.max_user_instances, counted per uid across user namespaces), says how
// many in the file "hogged", and holds them until the file "release" appears.
func inotifyHog() {
	n := 0
	var last error
	for n < 100000 {
		fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
		if err != nil {
			last = err
			break
		}
		_ = fd // held until exit
		n++
	}
	fmt.Printf("inotify instances taken: %d, then: %v\n", n, last)
	hold("hogged", fmt.Sprintf("%d uid %d\n", n, os.Getuid()))
}

// inotifyOne makes one inotify instance ("inotify_init ok" when it could), says so in
// the file "ready", and holds it until "release" appears.
func inotifyOne() {
	_, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	report("inotify_init", err)
	hold("ready", fmt.Sprintf("uid %d\n", os.Getuid()))
}

// hold writes content to name and waits, up to two minutes, for the file "release".
func hold(name, content string) {
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		fmt.Println("writing", name+":", err)
		return
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat("release"); err == nil {
			return
		}
	}
	fmt.Println("never released")
}
