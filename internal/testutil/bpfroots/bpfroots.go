// Package bpfroots removes what killed test processes left pinned in the bpffs. It is
// apart from testutil, which internal/linux's tests import: it needs internal/paths,
// which imports internal/linux.
package bpfroots

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/paths"
)

// testBPFRoot is the name of a test process's own bpffs root: the monitor package's
// (cordon-test-PID) and the integration tests' (cordon-itest-PID-N).
var testBPFRoot = regexp.MustCompile(`^cordon-i?test-([0-9]+)(-[0-9]+)?$`)

// bpffs is where the test roots are made.
const bpffs = "/sys/fs/bpf"

// Sweep removes the bpffs roots, and their lock files, of test processes that
// are gone. A test process killed before its cleanup (a timeout, ^C) leaves its pinned
// links behind, and with them its programs attached to the host's tracepoints: every
// open(2) on the machine runs them, for good, which slows every later benchmark and
// test. Unpinning them detaches them. A root whose process still runs (another package
// testing at the same time) is left alone; so is everything when the caller cannot
// read the bpffs (not root).
func Sweep() {
	ents, _ := os.ReadDir(bpffs)
	for _, e := range ents {
		if pid, ok := deadTestRoot(e.Name()); ok && pid > 0 {
			root := filepath.Join(bpffs, e.Name())
			_ = os.RemoveAll(root)
			_ = os.Remove(paths.BPFLock(root))
		}
	}
	// Lock files whose root is gone already (removed, the lock not).
	locks, _ := os.ReadDir(paths.HostDir)
	for _, e := range locks {
		name, ok := strings.CutPrefix(e.Name(), "bpf-sys-fs-bpf-")
		if !ok {
			continue
		}
		name, ok = strings.CutSuffix(name, ".lock")
		if _, dead := deadTestRoot(name); ok && dead {
			_ = os.Remove(filepath.Join(paths.HostDir, e.Name()))
		}
	}
}

// deadTestRoot reports, for a bpffs root's name, the test process it names and
// whether that is a test root whose process is gone.
func deadTestRoot(name string) (int, bool) {
	m := testBPFRoot.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	pid, err := strconv.Atoi(m[1])
	if err != nil || pid <= 0 {
		return 0, false
	}
	if _, err := os.Stat("/proc/" + m[1]); err == nil || !os.IsNotExist(err) {
		return pid, false
	}
	return pid, true
}
