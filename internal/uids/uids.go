// Package uids leases host uids from a range cordon owns, one to each live run (or
// session) whose sandbox needs a host uid of its own: root's cordon runs a bwrap
// sandbox of a root-owned workspace as an unprivileged host uid, and the kernel counts
// some resources per uid (inotify instances and watches, RLIMIT_NPROC, message queue
// bytes), so two tenants sharing one uid share those limits, and one can take them all.
//
// A lease is a file named by the uid in a root-only directory ([DefaultDir]), holding
// the [Record] of the process that owns it. It is made whole by link(2) (which, like
// O_EXCL, fails when the name exists) so no reader ever sees half a lease, and it
// outlives its owner: a cordon killed with SIGKILL leaves its lease, which the next
// allocation (when it needs the uid) and [Pool.Reclaim] (cordon gc) take back once its
// owner is gone and no process runs as the uid any more. A lease whose owner lives is
// never taken. Every change to the directory is made under one flock(2) on a lock file
// in it, which the kernel releases when its holder dies.
package uids

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/paths"
)

// RangeEnv names the variable that, when set, is the range of host uids cordon leases
// to sandboxes instead of [DefaultRange]: "BASE:COUNT" (uids BASE to BASE+COUNT-1;
// gid = uid). It replaces CORDON_SANDBOX_ID, the one fixed uid every such sandbox
// shared before.
const RangeEnv = "CORDON_UID_RANGE"

// LegacyEnv is the variable RangeEnv replaces; a cordon that finds it set refuses to
// guess and says so.
const LegacyEnv = "CORDON_SANDBOX_ID"

// DefaultRange is 64 Ki uids from 0x7C000000 (2080374784). No distribution, useradd
// or systemd allocates there: Debian's users end at 60000 and its reserved ids at
// 65535; useradd's subordinate ranges (/etc/subuid) are taken from 100000 to
// 600165535; systemd-nspawn's container ranges end at 1879048191 and its "foreign"
// range begins at 0x7FFE0000; and it stays below 2^31, above which some programs and
// kernel interfaces mishandle uids. It is aligned to 64 Ki, as systemd recommends for
// the blocks container managers take.
var DefaultRange = Range{Base: 0x7C000000, Count: 1 << 16}

// MaxCount bounds a range: an allocation that finds every uid leased reads every
// lease once, and that must stay quick.
const MaxCount = 1 << 20

// DefaultDir is where leases are kept ([paths.UIDLeases]). It is host-wide, not per
// run root: two cordons with different run roots ($CORDON_RUN_ROOT) lease from the
// same uids, and must see each other's leases. /run is emptied at boot, when no
// lease's owner runs any more.
const DefaultDir = paths.UIDLeases

// Range is the host uids BASE to BASE+Count-1.
type Range struct {
	Base  int
	Count int
}

// String is the range as RangeEnv writes it.
func (r Range) String() string { return strconv.Itoa(r.Base) + ":" + strconv.Itoa(r.Count) }

// Contains reports whether uid is in r.
func (r Range) Contains(uid int) bool { return uid >= r.Base && uid-r.Base < r.Count }

// MinBase is where a range may begin: the uids (and gids) below it are the host's own.
// Distributions hand 0 to 999 to system accounts and 1000 to 60000 to users, and
// reserve the rest: systemd's dynamic users are 61184 to 65519, 65534 is the overflow
// id (nobody) the kernel shows unmapped ids as, and 65535 is the 16-bit invalid id.
// A range that began lower could run a sandbox as an account of the host's.
const MinBase = 1 << 16

// MaxUID is the last uid a range may hold: 2^31-1. The kernel takes uids up to
// 4294967294 ((uint32)-1 is the invalid one), but bwrap cannot map a uid of 2^31 or
// above ("setting up uid map: Invalid argument"), and some programs read uids as
// signed 32-bit numbers.
const MaxUID = 1<<31 - 1

// Validate refuses a range that begins below [MinBase] (root, the host's system and
// user accounts, nobody), that passes [MaxUID] (and so never one that overflows a
// 32-bit uid), or that holds more than [MaxCount]
// uids. It reads nothing: [Range.CheckHost] checks a range against the host's
// accounts.
func (r Range) Validate() error {
	var errs []error
	if r.Base < MinBase {
		errs = append(errs, fmt.Errorf("the base must be %d or above: uids and gids 0 to %d are the host's own (root, system accounts, users, systemd's dynamic users, 65534 nobody)", MinBase, MinBase-1))
	}
	if r.Count < 1 || r.Count > MaxCount {
		errs = append(errs, fmt.Errorf("the count must be 1 to %d", MaxCount))
	}
	if r.Base > 0 && r.Count > 0 && int64(r.Base)+int64(r.Count)-1 > MaxUID {
		errs = append(errs, fmt.Errorf("the range passes %d, the last uid a sandbox may have (bwrap cannot map uids of 2^31 and above)", MaxUID))
	}
	return errors.Join(errs...)
}

// ParseRange reads "BASE:COUNT" and validates it ([Range.Validate]).
func ParseRange(s string) (Range, error) {
	b, c, ok := strings.Cut(s, ":")
	base, err1 := strconv.ParseInt(b, 10, 64)
	count, err2 := strconv.ParseInt(c, 10, 64)
	if ok && (errors.Is(err1, strconv.ErrRange) || errors.Is(err2, strconv.ErrRange)) {
		return Range{}, fmt.Errorf("%q: the range passes %d, the last uid a sandbox may have", s, MaxUID)
	}
	if !ok || err1 != nil || err2 != nil {
		return Range{}, fmt.Errorf("%q: want BASE:COUNT, such as %s", s, DefaultRange)
	}
	if base > MaxUID || count > MaxUID {
		return Range{}, fmt.Errorf("%q: the range passes %d, the last uid a sandbox may have", s, MaxUID)
	}
	r := Range{Base: int(base), Count: int(count)}
	if err := r.Validate(); err != nil {
		return Range{}, fmt.Errorf("%q: %w", s, err)
	}
	return r, nil
}

// RangeFromEnv is the range of this process's environment: $CORDON_UID_RANGE, else
// [DefaultRange], checked against the host's accounts ([Range.CheckHost]): a range
// that holds an account's id is refused, the default one too. $CORDON_SANDBOX_ID set
// is an error: it named one uid for every sandbox, which is what the range replaces.
func RangeFromEnv() (Range, error) {
	if v := os.Getenv(LegacyEnv); v != "" {
		return Range{}, fmt.Errorf("$%s is no longer read: every sandbox of a root-owned workspace now gets a host uid of its own from a range; set $%s=BASE:COUNT (default %s) instead", LegacyEnv, RangeEnv, DefaultRange)
	}
	v := os.Getenv(RangeEnv)
	if v == "" {
		if err := DefaultRange.CheckHost(); err != nil {
			return Range{}, fmt.Errorf("the default uid range %s: %w; set $%s=BASE:COUNT to a range no account uses", DefaultRange, err, RangeEnv)
		}
		return DefaultRange, nil
	}
	r, err := ParseRange(v)
	if err != nil {
		return Range{}, fmt.Errorf("$%s=%w", RangeEnv, err)
	}
	if err := r.CheckHost(); err != nil {
		return Range{}, fmt.Errorf("$%s=%q: %w", RangeEnv, v, err)
	}
	return r, nil
}

// Record is what a lease file holds: the uid, the process that owns the lease, and
// the run it is for (for the person reading the directory).
type Record struct {
	UID   int           `json:"uid"`
	Owner owner.Process `json:"owner"`
	Run   string        `json:"run,omitempty"`
}

// Errors returned by [Pool.Acquire].
var (
	// ErrExhausted: every uid of the range is leased by a live owner (or still runs a
	// process of a dead one). The caller refuses the run; it never shares a uid.
	ErrExhausted = errors.New("every host uid of the range is leased")
)
