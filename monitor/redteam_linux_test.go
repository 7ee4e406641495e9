package monitor

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/linux"
)

// TestPathDroppedBeforeExitAlerts: a path the programs cannot read at syscall entry is
// read again at exit; a workload that drops the page holding it after the kernel read
// it (MADV_DONTNEED from another thread) leaves the exit unable to read it too. Such an
// open of /etc/shadow must still alert, not only count as unresolved.
func TestPathDroppedBeforeExitAlerts(t *testing.T) {
	// a long walk widens the window between the kernel's copy and the syscall's exit
	shadow := strings.Repeat("/etc/..", 500) + "/etc/shadow"
	h := newHarness(t, hostProfile(), Options{})
	exe, _ := os.Executable()
	faulted := 0
	// The race is won by some tries only: rounds until one is, at most ten.
	for round := 0; faulted == 0 && round < 10; round++ {
		cmd := h.command(append(os.Environ(), helperEnv+"=dropped"), exe, "3000", shadow)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("helper: %v: %s", err, out)
		}
		_, records := h.got()
		for _, r := range records {
			if r.Syscall.isOpen() && r.Flags&flagFault != 0 && len(r.Str[0]) == 0 {
				faulted++
			}
		}
	}
	if faulted == 0 {
		t.Fatal("no open lost its page between the kernel's read and the exit: the test proves nothing")
	}
	if _, ok := h.find(func(a Alert) bool { return strings.Contains(a.Reason, "at entry nor at exit") }); !ok {
		t.Errorf("%d opens of /etc/shadow whose path the kernel read but the monitor could not: no alert", faulted)
	}
	if st := h.m.Stats(); st.Unresolved != 0 {
		t.Errorf("%d records counted unresolved, not reported", st.Unresolved)
	}
}

// openIn opens path through a descriptor of dir, the way how names (see
// TestDirfdTricksAreSent).
func openIn(how, dir, path string) {
	const inRoot = 0x10 // RESOLVE_IN_ROOT
	flags := syscall.O_RDONLY
	if strings.HasPrefix(how, "w") {
		how, flags = how[1:], syscall.O_WRONLY|syscall.O_CREAT
	}
	switch how {
	case "dir":
		linux.ProbeOpenIn(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, path, flags, 0)
	case "opath":
		linux.ProbeOpenIn(dir, oPath|syscall.O_DIRECTORY, path, flags, 0)
	case "procfd": // through /proc/self/fd: "N/path", N a descriptor of dir
		f, err := os.Open(dir)
		if err != nil {
			return
		}
		defer f.Close()
		linux.ProbeOpenIn("/proc/self/fd", syscall.O_RDONLY|syscall.O_DIRECTORY, fmt.Sprintf("%d/%s", f.Fd(), path), flags, 0)
	case "cwd": // through /proc/self/cwd, opened as a directory with dir the cwd
		if os.Chdir(dir) == nil {
			linux.ProbeOpenIn("/proc/self/cwd", oPath|syscall.O_DIRECTORY, path, flags, 0)
		}
	case "moved": // dir/a, opened, then renamed dir/secret: the walk must say where it is now
		os.Mkdir(dir+"/a", 0o700)
		f, err := os.Open(dir + "/a")
		if err != nil {
			return
		}
		defer f.Close()
		if os.Rename(dir+"/a", dir+"/secret") == nil {
			linux.ProbeOpenIn(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), syscall.O_RDONLY|syscall.O_DIRECTORY, path, flags, 0)
		}
	case "inroot": // openat2 RESOLVE_IN_ROOT: the absolute path is below dir
		linux.ProbeOpenIn(dir, oPath|syscall.O_DIRECTORY, path, flags, inRoot)
	}
}

// TestDirfdTricksAreSent: relative opens, filtered in the kernel on the directory the
// programs walk from the descriptor, through descriptors whose path could read
// otherwise than the directory (an O_PATH one, /proc/self/fd/N, /proc/self/cwd, a
// directory renamed into a hidden one after it was opened, openat2 RESOLVE_IN_ROOT).
// Each opens a hidden file or writes below a read-only rule: each must be sent and alert.
func TestDirfdTricksAreSent(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(ws+"/ro", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(ws+"/ro"+ws, 0o700); err != nil { // for RESOLVE_IN_ROOT
		t.Fatal(err)
	}
	prof := hostProfile(ws)
	prof.Paths = append(prof.Paths,
		PathRule{Path: ws + "/secret", Access: contract.Hidden, Why: "test"},
		PathRule{Path: ws + "/ro", Access: contract.ReadOnly, Why: "test"})
	cases := []struct{ open, wantPath string }{
		{"dir:/etc:shadow", "/etc/shadow"},
		{"opath:/etc:shadow", "/etc/shadow"},
		{"procfd:/etc:shadow", ""}, // below a descriptor: unfollowable, any path
		{"cwd:/etc:shadow", "/etc/shadow"},
		{"moved:" + ws + ":key", ws + "/secret/key"},
		{"wopath:" + ws + "/ro:x", ws + "/ro/x"},
		{"winroot:" + ws + "/ro:" + ws + "/x", ""}, // creates ws/ro/ws/x: any alert
	}
	h := newHarness(t, prof, Options{})
	exe, _ := os.Executable()
	for _, c := range cases {
		cmd := h.command(append(os.Environ(), helperEnv+"=openin"), exe, c.open)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", c.open, err, out)
		}
		alerts, records := h.got()
		var got []string
		for _, r := range records {
			if r.Syscall.isOpen() && r.PID == uint32(cmd.Process.Pid) {
				got = append(got, fmt.Sprintf("%q in %q", r.Str[0], r.Str[1]))
			}
		}
		if !hasAlertFrom(alerts, cmd.Process.Pid, c.wantPath) {
			t.Errorf("%s: no alert (want path %q); its opens sent: %s", c.open, c.wantPath, strings.Join(got, ", "))
		}
	}
}

// hasAlertFrom reports whether pid raised an alert on an open, of path unless it is "".
func hasAlertFrom(alerts []Alert, pid int, path string) bool {
	for _, a := range alerts {
		if a.PID == pid && strings.HasPrefix(a.Syscall, "open") && (path == "" || a.Path == path) {
			return true
		}
	}
	return false
}

// unfaultedThreads opens dir/T-I (I < m) from a page not faulted in, on n threads at once.
func unfaultedThreads(n, m int, dir string) {
	var wg sync.WaitGroup
	for t := 0; t < n; t++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread() // a thread of its own: exits when the goroutine does
			for i := 0; i < m; i++ {
				linux.ProbeOpenUnfaulted(fmt.Sprintf("%s/%d-%d", dir, t, i), syscall.O_RDONLY)
			}
		}()
	}
	wg.Wait()
}

// TestConcurrentPendingCallsAllSent: many threads whose paths fault at entry, at once,
// some exiting right after: each call goes through `pending` and the count of its
// entries (npending), which the exit program reads before looking. None may be lost.
func TestConcurrentPendingCallsAllSent(t *testing.T) {
	const threads, each = 64, 20
	h := newHarness(t, hostProfile(), Options{})
	exe, _ := os.Executable()
	cmd := h.command(append(os.Environ(), helperEnv+"=unfaulted-threads"), exe, fmt.Sprint(threads), fmt.Sprint(each), "/etc/shadow")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helper: %v: %s", err, out)
	}
	alerts, records := h.got()
	seen := map[string]bool{}
	for _, r := range records {
		if r.Syscall.isOpen() && strings.HasPrefix(string(r.Str[0]), "/etc/shadow/") {
			seen[string(r.Str[0])] = true
		}
	}
	var hidden int
	for _, a := range alerts {
		if strings.HasPrefix(a.Path, "/etc/shadow/") && a.Category == CatReadHidden {
			hidden++
		}
	}
	if len(seen) != threads*each || hidden != threads*each {
		t.Errorf("%d calls: %d read at exit, %d alerts (lost %d)", threads*each, len(seen), hidden, h.m.Stats().Lost)
	}
}

// TestEFAULTOpenDoesNotAlert: an open whose path the kernel could not read either (it
// failed with EFAULT) opened nothing: the exit program drops it, where a path dropped
// after the kernel read it (TestPathDroppedBeforeExitAlerts) alerts.
func TestEFAULTOpenDoesNotAlert(t *testing.T) {
	h := newHarness(t, hostProfile(), Options{})
	h.helper("badpointer", "/etc/shadow")
	alerts, _ := h.got()
	if !hasAlert(alerts, "/etc/shadow") {
		t.Fatal("control: no alert for /etc/shadow after the bad pointer")
	}
	for _, a := range alerts {
		if a.Category == CatUnwatched {
			t.Errorf("an open failed with EFAULT alerted: %+v", a)
		}
	}
}
