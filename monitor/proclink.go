package monitor

import (
	"path/filepath"
	"strings"
)

// A process's links in /proc (root, cwd, fd/N) lead somewhere else than their path
// says: /proc/self/root/etc/shadow is /etc/shadow. The sandbox's /dev/fd and
// /dev/std{in,out,err} are links to /proc/self/fd. The kernel's path filter sends every
// open below these (magicDirs), and user space follows what it can: a root link is
// read as the path below it (every process of a sandbox has the same root); the cwd
// and a descriptor cannot be known from the path, so a path that continues below one
// is a deviation of its own. A descriptor opened again as itself (/dev/stdout,
// /proc/self/fd/3) is compared as its /proc path.

// magicDirs are the directories whose opens the kernel's filter always sends.
var magicDirs = []string{"/proc", "/dev/fd", "/dev/stdin", "/dev/stdout", "/dev/stderr"}

// Kinds of /proc link.
const (
	linkRoot = "root"
	linkCwd  = "cwd"
	linkFD   = "fd"
)

// procLink reports whether the clean absolute path p goes through a process's root,
// cwd or descriptor link, and returns the link's kind and the path below it.
func procLink(p string) (kind, rest string, ok bool) {
	var s string
	switch {
	case strings.HasPrefix(p, "/proc/"):
		pid, after, _ := strings.Cut(p[len("/proc/"):], "/")
		if pid != "self" && pid != "thread-self" && !isNumber(pid) {
			return "", "", false
		}
		s = after
		if dir, after, _ := strings.Cut(s, "/"); dir == "task" {
			tid, after, _ := strings.Cut(after, "/")
			if !isNumber(tid) {
				return "", "", false
			}
			s = after
		}
	case strings.HasPrefix(p, "/dev/"):
		name, after, _ := strings.Cut(p[len("/dev/"):], "/")
		n, ok := map[string]string{"fd": "", "stdin": "0/", "stdout": "1/", "stderr": "2/"}[name]
		if !ok {
			return "", "", false
		}
		s = "fd/" + n + after
	default:
		return "", "", false
	}
	kind, rest, _ = strings.Cut(s, "/")
	switch kind {
	case linkRoot, linkCwd:
		return kind, rest, true
	case linkFD:
		n, below, _ := strings.Cut(rest, "/")
		return kind, below, isNumber(n)
	}
	return "", "", false
}

// throughRoot rewrites a path through a process's root link as the path below it.
func throughRoot(p string) string {
	for i := 0; i < 16; i++ { // /proc/self/root/proc/self/root/…
		kind, rest, ok := procLink(p)
		if !ok || kind != linkRoot {
			break
		}
		p = filepath.Clean("/" + rest)
	}
	return p
}

// unfollowable reports whether p continues below a cwd or descriptor link.
func unfollowable(p string) bool {
	kind, rest, ok := procLink(p)
	return ok && kind != linkRoot && rest != ""
}

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
