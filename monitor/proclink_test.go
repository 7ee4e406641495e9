package monitor

import (
	"syscall"
	"testing"
)

// TestProcLinksAreFollowed: an open through a process's root link in /proc is compared
// as the path below it; one below its cwd or a descriptor is a deviation of its own;
// a descriptor opened again as itself is the /proc rule's.
func TestProcLinksAreFollowed(t *testing.T) {
	chk := checker{prof: testProfile()}
	for _, c := range []struct {
		path     string
		write    bool
		category string // "" when allowed
	}{
		{"/proc/self/root/etc/shadow", false, CatReadHidden},
		{"/proc/thread-self/root/etc/shadow", false, CatReadHidden},
		{"/proc/42/root/etc/shadow", false, CatReadHidden},
		{"/proc/self/task/42/root/etc/shadow", false, CatReadHidden},
		{"/proc/self/root/proc/1/root/etc/shadow", false, CatReadHidden},
		{"/proc/self/root/home/u/proj/.git/config", true, CatWriteReadOnly},
		{"/proc/self/root/bin/sh", true, CatWriteReadOnly}, // and then through /bin
		{"/proc/self/root/usr/lib/x", false, ""},
		{"/proc/self/root", false, ""},
		{"/proc/self/cwd/.git/config", true, CatUnfollowable},
		{"/proc/1/cwd/x", false, CatUnfollowable},
		{"/proc/self/fd/3/x", false, CatUnfollowable},
		{"/dev/fd/3/x", false, CatUnfollowable},
		{"/dev/stdin/x", false, CatUnfollowable},
		{"/dev/stdout", true, ""},
		{"/proc/self/fd/1", true, ""},
		{"/proc/self/cwd", false, ""},
		{"/proc/self/status", false, ""},
		{"/proc/rootx/etc/shadow", false, ""}, // not a pid: /proc's own (read-only) rule
		{"/proc/self/rootx/etc", false, ""},
	} {
		flags := uint64(syscall.O_RDONLY)
		if c.write {
			flags = syscall.O_WRONLY
		}
		a, deviates, _ := chk.check(&Record{Syscall: SysOpenat, Args: [6]uint64{flags}, Str: [3][]byte{[]byte(c.path)}})
		if deviates != (c.category != "") || a.Category != c.category {
			t.Errorf("%s (write %v): deviates %v, category %q (path %s); want %q", c.path, c.write, deviates, a.Category, a.Path, c.category)
		}
	}
}

// TestFilterSendsProcLinks: nothing below /proc or the /dev links into it is kept in
// the kernel, whatever the rules above it allow.
func TestFilterSendsProcLinks(t *testing.T) {
	prof := testProfile()
	entries, ok := filterEntries(&prof)
	if !ok {
		t.Fatal("no filter")
	}
	for _, k := range []string{"/proc/", "/proc/self/", "/proc/thread-self/", "/dev/fd/", "/dev/stdin/", "/dev/stdout/", "/dev/stderr/"} {
		if v, ok := entries[k]; !ok || v != 0 {
			t.Errorf("filter entry %s = %v (present %v); want 0", k, v, ok)
		}
	}
}
