// Package bpfroots removes what killed test processes left pinned in the bpffs. It is
// apart from testutil, which internal/linux's tests import: it needs internal/paths,
// which imports internal/linux.
package bpfroots

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/internal/testutil"
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
		if deadTestRoot(e.Name()) {
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
		if ok && deadTestRoot(name) {
			_ = os.Remove(filepath.Join(paths.HostDir, e.Name()))
		}
	}
}

// deadTestRoot reports whether name is a test process's bpffs root whose process
// is gone.
func deadTestRoot(name string) bool {
	m := testBPFRoot.FindStringSubmatch(name)
	return m != nil && m[1] != "0" && testutil.ProcessGone(m[1])
}
