package uids

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/paths"
)

// Pool leases the uids of Range, keeping the leases in Dir. Pools of any number of
// processes (and goroutines) on one host may share Dir: each uid is leased to one
// owner at a time. A Pool is a value with no state of its own beyond its fields.
type Pool struct {
	Dir   string // a directory only root reaches ([DefaultDir]); made 0700 when missing
	Range Range

	// busy reports whether a process runs as uid; nil means look in /proc. A dead
	// owner's lease is not taken back while its uid still runs anything.
	busy func(uid int) bool
}

// Default is the host's pool: [DefaultDir] and the range of this process's
// environment ([RangeFromEnv]).
func Default() (*Pool, error) {
	r, err := RangeFromEnv()
	if err != nil {
		return nil, err
	}
	return &Pool{Dir: DefaultDir, Range: r}, nil
}

// lockWait bounds how long an allocation waits for another's lock: it is held for a
// directory read and a few small files, so a wait this long means a holder is stuck.
const lockWait = 10 * time.Second

// newPrefix names the temporary file a lease is written to before it is linked into
// place; one left behind (its writer died holding the lock) is removed under the lock.
const newPrefix = ".new-"

// lockName is the lock file in Dir (a name no uid has).
const lockName = ".lock"

// Lease is one uid leased to this process. Release returns it; a lease not released
// (the process died) is taken back by [Pool.Reclaim] (cordon gc), or by an allocation
// that finds every uid of its range leased.
type Lease struct {
	pool *Pool
	rec  Record
	once sync.Once
	err  error
}

// UID is the leased uid (and gid).
func (l *Lease) UID() int { return l.rec.UID }

// Acquire leases a free uid of the range to this process for run. Free means no lease
// names it, or its lease's owner is gone and no process runs as it any more. The uid
// is picked from a random place in the range onwards, so that a uid just released is
// seldom the next one leased. Every uid leased by a live owner: an error that wraps
// [ErrExhausted].
func (p *Pool) Acquire(run string) (*Lease, error) { return p.acquire(owner.Self(), run) }

func (p *Pool) acquire(o owner.Process, run string) (*Lease, error) {
	if err := p.Range.Validate(); err != nil {
		return nil, fmt.Errorf("uid range %s: %w", p.Range, err)
	}
	unlock, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	taken, err := p.scan()
	if err != nil {
		return nil, err
	}
	used, err := inUse(p.Range)
	if err != nil {
		return nil, err
	}
	rec := Record{Owner: o, Run: run}
	start := rand.IntN(p.Range.Count)
	inRange := 0
	for uid := range taken {
		if p.Range.Contains(uid) {
			inRange++
		}
	}
	if inRange < p.Range.Count {
		for i := 0; i < p.Range.Count; i++ {
			uid := p.Range.Base + (start+i)%p.Range.Count
			if taken[uid] || used[uid] {
				continue
			}
			rec.UID = uid
			err := p.write(rec)
			if errors.Is(err, fs.ErrExist) {
				continue // not ours to judge: made outside the lock
			}
			if err != nil {
				return nil, err
			}
			return &Lease{pool: p, rec: rec}, nil
		}
	}
	// Every uid is leased: take back every one whose owner is gone (all of them at
	// once, so that the next allocations find them free), and lease the first.
	freed, err := p.reclaim(taken)
	for _, uid := range freed {
		if !p.Range.Contains(uid) || used[uid] {
			continue // another range's, or a host process's
		}
		rec.UID = uid
		if err := p.write(rec); err != nil {
			return nil, err
		}
		return &Lease{pool: p, rec: rec}, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("%w: all %d uids of %s are leased by live runs (%s) or run host processes (%d); wait for one to end, or give $%s a wider range",
		ErrExhausted, p.Range.Count, p.Range, p.Dir, len(used), RangeEnv)
}

// Release removes the lease, when it is still this one's (it always is while its owner
// lives). It is idempotent.
func (l *Lease) Release() error {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		unlock, err := l.pool.lock()
		if err != nil {
			l.err = err
			return
		}
		defer unlock()
		got, err := l.pool.read(l.rec.UID)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return
		case err != nil:
			l.err = err
			return
		case got != l.rec:
			return // taken back and leased again: no longer ours to remove
		}
		if err := os.Remove(l.pool.path(l.rec.UID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.err = fmt.Errorf("releasing host uid %d: %w", l.rec.UID, err)
		}
	})
	return l.err
}

// Reclaim removes every lease in the directory (of any range: it needs no Range)
// whose owner is gone and whose uid runs no process, and what a writer that died left
// half made, and returns the uids it freed. A pool whose directory does not exist has
// nothing to reclaim.
func (p *Pool) Reclaim() ([]int, error) {
	if _, err := os.Lstat(p.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	unlock, err := p.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	taken, err := p.scan()
	if err != nil {
		return nil, err
	}
	return p.reclaim(taken)
}

// reclaim removes the leases of taken that are stale, and returns their uids, in
// order (the caller holds the lock).
func (p *Pool) reclaim(taken map[int]bool) ([]int, error) {
	var freed []int
	var errs []error
	for _, uid := range slices.Sorted(maps.Keys(taken)) {
		if !p.stale(uid) {
			continue
		}
		if err := os.Remove(p.path(uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing the lease of uid %d: %w", uid, err))
			continue
		}
		freed = append(freed, uid)
	}
	return freed, errors.Join(errs...)
}

// Leases lists the leases in the pool's directory, of any range.
func (p *Pool) Leases() ([]Record, error) {
	entries, err := os.ReadDir(p.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, e := range entries {
		uid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if rec, err := p.read(uid); err == nil {
			out = append(out, rec)
		}
	}
	return out, nil
}

// stale reports whether uid's lease may be taken back: it names an owner that is gone,
// and no process runs as uid (the sandbox of a cordon killed a moment ago may still be
// going down). A lease that cannot be read is not stale: it is made whole or not at
// all, so it is not one of ours, and is left alone.
func (p *Pool) stale(uid int) bool {
	rec, err := p.read(uid)
	if err != nil || rec.UID != uid || rec.Owner.Alive() {
		return false
	}
	busy := p.busy
	if busy == nil {
		busy = uidBusy
	}
	return !busy(uid)
}

// scan reads the directory (the caller holds the lock): the uids leased, of any range
// (another cordon's $CORDON_UID_RANGE may differ), and it removes what a writer that
// died left half made.
func (p *Pool) scan() (map[int]bool, error) {
	entries, err := os.ReadDir(p.Dir)
	if err != nil {
		return nil, fmt.Errorf("reading the uid leases: %w", err)
	}
	taken := make(map[int]bool, len(entries))
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, newPrefix) {
			_ = os.Remove(filepath.Join(p.Dir, name)) // its writer died holding the lock
			continue
		}
		if uid, err := strconv.Atoi(name); err == nil && uid > 0 && name == strconv.Itoa(uid) {
			taken[uid] = true
		}
	}
	return taken, nil
}

func (p *Pool) path(uid int) string { return filepath.Join(p.Dir, strconv.Itoa(uid)) }

// write makes rec's lease whole: written to a temporary file, then linked to the uid's
// name, which fails with fs.ErrExist when a lease has it.
func (p *Pool) write(rec Record) error {
	data, _ := json.Marshal(rec)
	tmp := filepath.Join(p.Dir, newPrefix+strconv.Itoa(os.Getpid())+"-"+strconv.FormatUint(rand.Uint64(), 36))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("writing the lease of uid %d: %w", rec.UID, err)
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Link(tmp, p.path(rec.UID))
	}
	_ = os.Remove(tmp)
	if werr != nil {
		if errors.Is(werr, fs.ErrExist) {
			return werr
		}
		return fmt.Errorf("writing the lease of uid %d: %w", rec.UID, werr)
	}
	return nil
}

// read reads uid's lease, following no link.
func (p *Pool) read(uid int) (Record, error) {
	var rec Record
	f, err := os.OpenFile(p.path(uid), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return rec, err
	}
	defer f.Close()
	data := make([]byte, 4096)
	n, err := f.Read(data)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(data[:n], &rec); err != nil {
		return rec, fmt.Errorf("the lease of uid %d: %w", uid, err)
	}
	return rec, nil
}

// lock makes Dir (0700) when it is missing, checks that only this user can change it,
// and takes the pool's lock, waiting up to lockWait.
func (p *Pool) lock() (unlock func(), err error) {
	if err := p.ensureDir(); err != nil {
		return nil, err
	}
	path := filepath.Join(p.Dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the uid lease lock: %w", err)
	}
	deadline := time.Now().Add(lockWait)
	for wait := 50 * time.Microsecond; ; wait = min(2*wait, 5*time.Millisecond) {
		ok, err := linux.TryLock(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if ok {
			return func() { f.Close() }, nil
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("waited %v for the uid lease lock %s: another cordon holds it", lockWait, path)
		}
		time.Sleep(wait)
	}
}

// ensureDir makes Dir when it is missing, as [paths.MakeDir] does: every directory
// from / down owned by root or this user and writable by no one else (a sticky one
// aside), Dir itself this user's. Whoever could change the leases, or rename a
// directory on the way to them, would choose which uid two sandboxes share.
func (p *Pool) ensureDir() error {
	if err := paths.MakeDir(p.Dir, paths.Owner()); err != nil {
		return fmt.Errorf("the uid lease directory: %w", err)
	}
	return nil
}
