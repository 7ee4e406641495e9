package runner

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// fanotifyMarks counts the file-system marks of this process's fanotify groups.
func fanotifyMarks(t *testing.T) int {
	t.Helper()
	infos, err := filepath.Glob("/proc/self/fdinfo/*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range infos {
		b, _ := os.ReadFile(p) // an fd closed meanwhile (the glob's own) is gone
		n += strings.Count(string(b), "fanotify sdev:")
	}
	return n
}

// When a one-command run's sandbox has ended, stopWatchSoon removes the live watch's
// mark but leaves the watch open (its reader still takes what it had queued), so that
// the kernel retires the mark beside the diff and teardown and the close that comes in
// teardown does not wait for it; an unmark once the close has begun does nothing.
func TestStopWatchSoonUnmarksFirst(t *testing.T) {
	testutil.RequireRoot(t)
	w, err := linux.WatchCreates(t.TempDir(), watched)
	if err != nil {
		t.Fatal(err)
	}
	lw := &liveWatch{w: w, closed: make(chan struct{})}
	r := &run{o: &Options{Log: slog.New(slog.DiscardHandler)}, live: lw}
	defer r.waitWatchClosed()
	if n := fanotifyMarks(t); n != 1 {
		t.Fatalf("%d file-system marks while the watch runs, want 1", n)
	}
	r.stopWatchSoon()
	if n := fanotifyMarks(t); n != 0 {
		t.Fatalf("%d file-system marks once the sandbox has ended, want none", n)
	}
	lw.fdMu.Lock()
	closing := lw.closing
	lw.fdMu.Unlock()
	if closing {
		t.Fatal("stopWatchSoon began closing the watch: that close waits for the kernel to retire the mark")
	}
	r.stopWatch()
	r.waitWatchClosed()
	if err := lw.unmark(); err != nil {
		t.Fatalf("unmark after the close: %v", err)
	}
}
