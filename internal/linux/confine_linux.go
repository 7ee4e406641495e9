package linux

import (
	"errors"
	"fmt"

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

// Landlock file-system rights (linux/landlock.h), by the ABI that brought them.
const (
	llExecute   = 1 << 0
	llWriteFile = 1 << 1
	llReadFile  = 1 << 2
	llReadDir   = 1 << 3
	llABI1      = 1<<13 - 1 // execute … make_sym
	llRefer     = 1 << 13   // ABI 2
	llTruncate  = 1 << 14   // ABI 3
	llIoctlDev  = 1 << 15   // ABI 5
	// Rights that apply to a file rather than a directory.
	llFileRights = llExecute | llWriteFile | llReadFile | llTruncate | llIoctlDev
	llRead       = llExecute | llReadFile | llReadDir
)

// LandlockABI returns the Landlock ABI version the kernel offers (0: none).
func LandlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// handledFS is every right of ABI 1 to 5 the kernel knows: the ruleset handles all of
// them, so that a right nothing grants is denied. Later ABIs' rights (unix socket
// resolution) stay unhandled: the network namespace bounds those.
func handledFS(abi int) uint64 {
	h := uint64(llABI1)
	if abi >= 2 {
		h |= llRefer
	}
	if abi >= 3 {
		h |= llTruncate
	}
	if abi >= 5 {
		h |= llIoctlDev
	}
	return h
}

// Ruleset is a Landlock ruleset built once from [FSRules] and enforced on each thread
// that asks, each time as a new domain: process 1 builds it at start and confines,
// before each fork, the thread a command is forked from.
type Ruleset struct {
	fd int
}

// NewRuleset builds the ruleset for r. Paths that do not exist are skipped.
func NewRuleset(r FSRules) (*Ruleset, error) {
	abi := LandlockABI()
	if abi == 0 {
		return nil, errors.New("landlock is not available in this kernel")
	}
	handled := handledFS(abi)
	fd, err := ll.LandlockCreateRuleset(&ll.RulesetAttr{HandledAccessFS: handled}, 0)
	if err != nil {
		return nil, fmt.Errorf("landlock: creating a ruleset: %w", err)
	}
	unix.CloseOnExec(fd)
	rs := &Ruleset{fd: fd}
	all := handled &^ llIoctlDev
	for _, g := range []struct {
		paths  []string
		access uint64
	}{
		{r.Read, llRead}, {r.Write, all}, {r.Devices, handled}, {r.List, llReadDir},
	} {
		for _, p := range g.paths {
			if err := rs.add(p, g.access&handled); err != nil {
				rs.Close()
				return nil, err
			}
		}
	}
	return rs, nil
}

func (rs *Ruleset) add(path string, access uint64) error {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("landlock: opening %s: %w", path, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fmt.Errorf("landlock: stat %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFileRights
	}
	if access == 0 {
		return nil
	}
	attr := ll.PathBeneathAttr{AllowedAccess: access, ParentFd: pfd}
	if err := ll.LandlockAddPathBeneathRule(rs.fd, &attr, 0); err != nil {
		return fmt.Errorf("landlock: a rule for %s: %w", path, err)
	}
	return nil
}

// RestrictThread confines the calling OS thread, and everything it starts, to the
// ruleset, as a new Landlock domain, for good. The thread must have no_new_privs
// (process 1's does) and be locked to its goroutine, which must end without
// unlocking it: the thread then dies instead of serving other goroutines.
func (rs *Ruleset) RestrictThread() error {
	if err := ll.LandlockRestrictSelf(rs.fd, 0); err != nil {
		return fmt.Errorf("landlock: restricting: %w", err)
	}
	return nil
}

// Close releases the ruleset.
func (rs *Ruleset) Close() error { return unix.Close(rs.fd) }

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

// MountID returns the ID (as /proc/self/mountinfo numbers it) of the mount path is
// on: the one a lookup of path reaches now, whatever else is stacked at or above it.
func MountID(path string) (int, error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT, unix.STATX_MNT_ID, &st); err != nil {
		return 0, err
	}
	if st.Mask&unix.STATX_MNT_ID == 0 {
		return 0, unix.ENOSYS
	}
	return int(st.Mnt_id), nil
}

// IsDevNull reports whether path is the null device (what container engines bind over
// the /proc files they mask).
func IsDevNull(path string) bool {
	var st unix.Stat_t
	return unix.Stat(path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && unix.Major(st.Rdev) == 1 && unix.Minor(st.Rdev) == 3
}

// CloseOnExecFrom marks every descriptor from fd up close-on-exec: what process 1
// inherited (from bwrap or an engine) then never reaches a command it starts.
func CloseOnExecFrom(fd int) error {
	return unix.CloseRange(uint(fd), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
}
