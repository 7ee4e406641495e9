package quota

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"time"
)

// The bounds of measuring an audit root. A tree past them is not walked further, and
// the tenant is refused new sessions (the safe answer: its size is unknown) until it
// is pruned.
const (
	maxAuditEntries = 250_000          // files and directories walked
	maxAuditWalk    = 5 * time.Second  // time spent walking
	auditEvery      = 30 * time.Second // a measurement is reused for this long
)

// ErrUnmeasured: an audit root is past the bounds of a walk (entries or time).
var ErrUnmeasured = errors.New("the audit root is too large to measure")

// AuditUsage is the bytes of the regular files under root, found by a walk that
// follows no symbolic link and stops past maxEntries entries or when the time is
// past deadline: then it returns what it counted and [ErrUnmeasured]. A root that
// does not exist holds 0 bytes.
func AuditUsage(root string, maxEntries int, deadline time.Time) (int64, error) {
	var total int64
	n := 0
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == root && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		n++
		if n > maxEntries {
			return fmt.Errorf("%w: more than %d entries under %s", ErrUnmeasured, maxEntries, root)
		}
		if n%256 == 0 && time.Now().After(deadline) {
			return fmt.Errorf("%w: walking %s took longer than the bound (%d entries so far)", ErrUnmeasured, root, n)
		}
		if e.Type().IsRegular() {
			info, err := e.Info()
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed while walking
				}
				return err
			}
			total += info.Size()
		}
		return nil
	})
	return total, err
}

// meter is one tenant's audit root against its quota, measured at most once every
// auditEvery. Safe for concurrent use.
type meter struct {
	root       string
	limit      int64
	maxEntries int

	// mu guards the fields below, and is held across a measurement: one walk at a
	// time per tenant, the others waiting for its figure.
	mu   sync.Mutex
	at   time.Time // when used and err were measured; zero: never
	used int64
	err  error
}

// check measures when the last figure is older than auditEvery and refuses when the
// root holds more than the quota or could not be measured.
func (m *meter) check(clock func() time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := clock()
	if m.at.IsZero() || now.Sub(m.at) >= auditEvery || now.Before(m.at) {
		m.used, m.err = AuditUsage(m.root, m.maxEntries, time.Now().Add(maxAuditWalk))
		m.at = now
	}
	retry := clampRetry(auditEvery - now.Sub(m.at))
	switch {
	case errors.Is(m.err, ErrUnmeasured):
		return &Exceeded{Quota: Audit, RetryAfter: retry, Detail: "the audit root holds too many files to measure; prune it"}
	case m.err != nil:
		return fmt.Errorf("measuring the audit root: %w", m.err)
	case m.used > m.limit:
		return &Exceeded{Quota: Audit, RetryAfter: retry,
			Detail: fmt.Sprintf("the audit root holds %d bytes, over the quota of %d; prune it", m.used, m.limit)}
	}
	return nil
}

// forget drops the last figure: the next check measures.
func (m *meter) forget() {
	m.mu.Lock()
	m.at = time.Time{}
	m.mu.Unlock()
}
