package monitor

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestFilterDropsOnlyWhatTheProfileAllows drives both paths with the same opens: the
// kernel's path filter and user space's Profile check. Every open the check would alert
// on must reach user space and alert; the filter must keep in the kernel the plainly
// allowed ones (else it filters nothing and the test proves nothing).
func TestFilterDropsOnlyWhatTheProfileAllows(t *testing.T) {
	long := "/usr/" + strings.Repeat("a", 300)                                      // too long for a key
	cut := "/usr/" + strings.Repeat("a/", 2100) + "../../../../../../../etc/shadow" // cut at 4096 bytes
	cases := []struct {
		open     string // "r:PATH" or "w:PATH"
		filtered bool   // must stay in the kernel
	}{
		{"r:/usr/bin/true", true},                // just inside a read-only prefix
		{"r:/usr", true},                         // the prefix itself
		{"w:/usr/bin/cordon-filter-test", false}, // a write under a read-only rule
		{"r:/usrx/y", false},                     // just outside: a sibling sharing the prefix's bytes
		{"r:/etc/shadow", false},                 // a hidden rule below a read-only one
		{"r:/etc/shadow/x", false},               // below the hidden rule
		{"r:/etc/passwd", true},                  // beside it
		{"r:/usr/../etc/shadow", false},          // ".." out of an allowed prefix
		{"r:/usr/./../etc/shadow", false},        // "." and ".."
		{"r:/usr//../etc/shadow", false},         // "//"
		{"r:/usr/bin/..", false},                 // a trailing ".."
		{"r:/usr/bin/", false},                   // a trailing "/"
		{"r:/bin/sh", false},                     // through a link (read as its target)
		{"r:" + long, false},                     // longer than a key
		{"r:" + cut, false},                      // cut in the kernel: never allowed
		{"w:/dev/null", true},                    // a read-write rule, written
		{"r:/proc/kcore", false},                 // hidden inside /proc
		{"r:/proc/self/root/etc/shadow", false},  // a process's root link: /etc/shadow
		{"w:/proc/self/cwd/x", false},            // below a cwd link: the cwd is not known
		{"r:/dev/fd/0/x", false},                 // /dev/fd is a link to /proc/self/fd
		{"r:/dev/core", false},                   // a link to /proc/kcore (bwrap, runc)
		{"r:/dev/ptmx", true},                    // a link to pts/ptmx, both read-write
	}
	// The write case creates its file as root: remove it after, unless it was there.
	const made = "/usr/bin/cordon-filter-test"
	if _, err := os.Lstat(made); errors.Is(err, fs.ErrNotExist) {
		t.Cleanup(func() { os.Remove(made) })
	}
	h := newHarness(t, hostProfile(), Options{})
	var args []string
	for _, c := range cases {
		args = append(args, c.open)
	}
	h.helper("open", args...)
	alerts, records := h.got()
	sent := map[string]bool{}
	for _, r := range records {
		if r.Syscall.isOpen() {
			sent[string(r.Str[0])] = true
		}
	}
	chk := checker{prof: hostProfile()}
	for _, c := range cases {
		path := c.open[2:]
		flags := uint64(syscall.O_RDONLY)
		if c.open[0] == 'w' {
			flags = syscall.O_WRONLY | syscall.O_CREAT
		}
		rec := Record{Syscall: SysOpenat, Args: [6]uint64{flags}, Str: [3][]byte{[]byte(path)}}
		if len(path) >= 4096 {
			rec.Str[0], rec.Flags = []byte(path[:4095]), flagTrunc
		}
		want, deviates, _ := chk.check(&rec)
		name := c.open
		if len(name) > 60 {
			name = name[:60] + "…"
		}
		key := path
		if len(key) >= 4096 {
			key = path[:4095]
		}
		switch {
		case deviates && !sent[key]:
			t.Errorf("%s: user space alerts on it, but the kernel did not send it", name)
		case deviates && !hasAlert(alerts, want.Path): // repeats of one alert are emitted once
			t.Errorf("%s: sent, but no alert", name)
		case c.filtered && sent[key]:
			t.Errorf("%s: allowed by the profile, but sent: the filter is not filtering", name)
		case !c.filtered && !sent[key]:
			t.Errorf("%s: filtered in the kernel; want it sent", name)
		}
	}
	if s := h.m.Stats(); s.Filtered == 0 {
		t.Errorf("stats %+v: nothing filtered", s)
	}
}

func hasAlert(alerts []Alert, path string) bool {
	for _, a := range alerts {
		if a.Path == path {
			return true
		}
	}
	return false
}

// TestNoFilterSendsEverything: a profile the filter cannot represent (a rule too long
// for a key) leaves the run without a filter, and every open reaches user space.
func TestNoFilterSendsEverything(t *testing.T) {
	prof := hostProfile()
	prof.Paths = append(prof.Paths, PathRule{Path: "/" + strings.Repeat("x", 300), Access: 1, Why: "too long"})
	if _, ok := filterEntries(&prof); ok {
		t.Fatal("a 301-byte rule fit in the filter")
	}
	h := newHarness(t, prof, Options{})
	h.helper("open", "r:/usr/bin/true", "r:/dev/null")
	_, records := h.got()
	sent := map[string]bool{}
	for _, r := range records {
		sent[string(r.Str[0])] = true
	}
	if !sent["/usr/bin/true"] || !sent["/dev/null"] || h.m.Stats().Filtered != 0 {
		t.Errorf("without a filter: sent %v, stats %+v; want every open sent", sent, h.m.Stats())
	}
}

// TestFilterRelativeOpens: a relative open is filtered on its directory and its path
// joined as user space joins them; whatever user space would alert on is still sent.
func TestFilterRelativeOpens(t *testing.T) {
	cases := []struct {
		dir, open string // the helper's working directory; "r:PATH" or "w:PATH"
		filtered  bool
	}{
		{"/usr", "r:bin/true", true},                         // inside a read-only prefix
		{"/", "r:usr/lib", true},                             // from the root
		{"/etc", "r:passwd", true},                           // beside a hidden rule
		{"/etc", "r:shadow", false},                          // the hidden rule
		{"/usr", "r:../etc/shadow", false},                   // ".." out of an allowed prefix
		{"/usr", "r:./bin/env", false},                       // "." (unclean: sent, allowed)
		{"/usr", "r:lib//os-release", false},                 // "//"
		{"/usr", "r:sbin/..", false},                         // a trailing ".."
		{"/usr", "w:cordon-no-such-dir/x", false},            // a write under a read-only rule
		{"/usr/lib", "r:" + strings.Repeat("b", 250), false}, // joined, longer than a key
		{"/proc", "r:self/root/etc/shadow", false},           // a process's root link
		{"/", "r:bin/sh", false},                             // through a link
	}
	h := newHarness(t, hostProfile(), Options{})
	exe, _ := os.Executable()
	for _, c := range cases {
		cmd := h.command(append(os.Environ(), helperEnv+"=open"), exe, c.open)
		cmd.Dir = c.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s in %s: %v: %s", c.open, c.dir, err, out)
		}
	}
	alerts, records := h.got()
	sent := map[string]bool{}
	for _, r := range records {
		if r.Syscall.isOpen() && r.Flags&flagRelative != 0 {
			sent[string(r.Str[1])+" "+string(r.Str[0])] = true
		}
	}
	chk := checker{prof: hostProfile()}
	for _, c := range cases {
		path := c.open[2:]
		flags := uint64(syscall.O_RDONLY)
		if c.open[0] == 'w' {
			flags = syscall.O_WRONLY | syscall.O_CREAT
		}
		rec := Record{Syscall: SysOpenat, Args: [6]uint64{flags}, Flags: flagRelative, Str: [3][]byte{[]byte(path), []byte(c.dir)}}
		want, deviates, _ := chk.check(&rec)
		key := c.dir + " " + path
		switch {
		case deviates && !sent[key]:
			t.Errorf("%s in %s: user space alerts on it, but the kernel did not send it", c.open, c.dir)
		case deviates && !hasAlert(alerts, want.Path):
			t.Errorf("%s in %s: sent, but no alert", c.open, c.dir)
		case c.filtered && sent[key]:
			t.Errorf("%s in %s: allowed by the profile, but sent: the filter is not filtering", c.open, c.dir)
		case !c.filtered && !sent[key]:
			t.Errorf("%s in %s: filtered in the kernel; want it sent", c.open, c.dir)
		}
	}
}
