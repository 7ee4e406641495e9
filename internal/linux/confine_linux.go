package linux

import (
	"errors"
	"fmt"
	"os"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// FSRules is a Landlock file-system ruleset: what a confined process may still reach
// through the mount tree it sees.
type FSRules struct {
	// Read paths may be read, listed and executed below.
	Read []string
	// Write paths may also be written, created in, removed from and renamed within
	// (Landlock's refer right), below.
	Write []string
	// Devices are like Write, plus ioctl on device files (terminals).
	Devices []string
	// List paths may only be listed below (read_dir): the sandbox's root, whose
	// files are reachable only through Read and Write.
	List []string
}

// landlockFS is every file-system right up to Landlock ABI 5. The ruleset handles
// all of them, so that a right nothing grants is denied; later ABIs' rights (unix
// socket resolution) are left unhandled: the network namespace bounds those.
const landlockFS = landlock.AccessFSSet(ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile |
	ll.AccessFSReadDir | ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar |
	ll.AccessFSMakeDir | ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo |
	ll.AccessFSMakeBlock | ll.AccessFSMakeSym | ll.AccessFSRefer | ll.AccessFSTruncate | ll.AccessFSIoctlDev)

// LandlockABI returns the Landlock ABI version the kernel offers (0: none).
func LandlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Landlock confines the calling process and every process it starts to r, for good.
// It needs no_new_privs. Paths that do not exist are skipped. Rights the kernel's
// Landlock does not know are dropped (best effort), never the whole ruleset: with
// ABI 1 or later something is always enforced.
func Landlock(r FSRules) error {
	if LandlockABI() == 0 {
		return errors.New("landlock is not available in this kernel")
	}
	cfg, err := landlock.NewConfig(landlockFS)
	if err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	var rules []landlock.Rule
	for _, p := range r.Read {
		ro := landlock.ROFiles(p)
		rules = append(rules, ruleFor(p, landlock.RODirs(p), &ro)...)
	}
	for _, p := range r.Write {
		rw := landlock.RWFiles(p)
		rules = append(rules, ruleFor(p, landlock.RWDirs(p).WithRefer(), &rw)...)
	}
	for _, p := range r.Devices {
		dev := landlock.RWFiles(p).WithIoctlDev()
		rules = append(rules, ruleFor(p, landlock.RWDirs(p).WithRefer().WithIoctlDev(), &dev)...)
	}
	for _, p := range r.List {
		rules = append(rules, ruleFor(p, landlock.PathAccess(landlock.AccessFSSet(ll.AccessFSReadDir), p), nil)...)
	}
	if err := cfg.BestEffort().RestrictPaths(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// ruleFor picks dir for a directory and file (nil: none) for anything else; a path
// that does not exist gives no rule.
func ruleFor(p string, dir landlock.FSRule, file *landlock.FSRule) []landlock.Rule {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return nil
	case fi.IsDir():
		return []landlock.Rule{dir}
	case file != nil:
		return []landlock.Rule{*file}
	}
	return nil
}

// SetDumpable sets the calling process's dumpable flag. A process that is not dumpable
// cannot be ptraced, and its /proc/PID/fd, mem and environ are closed, to any process
// without CAP_SYS_PTRACE: cordon's process 1 clears it before it holds anything.
func SetDumpable(on bool) error {
	v := 0
	if on {
		v = 1
	}
	return unix.Prctl(unix.PR_SET_DUMPABLE, uintptr(v), 0, 0, 0)
}

// Dumpable reports the calling process's dumpable flag.
func Dumpable() (bool, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return v == 1, err
}

// CloseFrom closes every descriptor from fd up, so that nothing the caller holds
// reaches what it executes next.
func CloseFrom(fd int) error {
	return unix.CloseRange(uint(fd), ^uint(0), 0)
}

// Writable reports whether the calling process, with its effective ids, may open
// path for writing: permissions, read-only mounts and capabilities all count. A path
// that does not exist is not writable.
func Writable(path string) bool {
	return unix.Faccessat(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS) == nil
}

// IsDevNull reports whether path is the null device (what container engines bind over
// the /proc files they mask).
func IsDevNull(path string) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && unix.Major(st.Rdev) == 1 && unix.Minor(st.Rdev) == 3
}
