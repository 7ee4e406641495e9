package monitor

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
)

// slot is the ring buffer and path filter a run holds while it is registered, with the
// ticket every event sent for it carries.
type slot struct {
	n            uint32
	claim        monitorClaim
	ticket       uint64
	ring, filter *ebpf.Map
	rd           *ringbuf.Reader
	drained      uint64 // records an earlier holder left in the ring buffer, dropped at the claim
}

func (s *slot) close() {
	if s.rd != nil {
		s.rd.Close() // a second Close does nothing
	}
	s.ring.Close()
	s.filter.Close()
}

// claim takes the lowest free slot for c (BPF_NOEXIST: a slot has one claim), making
// its ring buffer and filter when it has none, or a ring buffer of another size, and
// empties its ring buffer of what an earlier holder left. The caller holds the lock and
// has swept the claims of cordons that are gone.
func (p *pinned) claim(c monitorClaim, ringSize uint32) (*slot, error) {
	for n := uint32(0); n < maxSlots; n++ {
		err := p.claims.Update(n, c, ebpf.UpdateNoExist)
		if errors.Is(err, ebpf.ErrKeyExist) {
			continue
		}
		if err != nil {
			return nil, unavailable("claiming a slot: %w", err)
		}
		s, err := p.open(n, ringSize)
		if err != nil {
			p.claims.Delete(n)
			return nil, unavailable("opening slot %d: %w", n, err)
		}
		s.claim = c
		var t [8]byte
		rand.Read(t[:])
		s.ticket = binary.NativeEndian.Uint64(t[:])
		return s, nil
	}
	return nil, unavailable("all %d slots are held by live runs: the monitor watches at most %d runs at once on a host", maxSlots, maxSlots)
}

// open opens slot n's ring buffer and filter, making what it lacks, and a reader that
// has dropped every record already in the ring buffer.
func (p *pinned) open(n uint32, ringSize uint32) (*slot, error) {
	s := &slot{n: n}
	var err error
	ringSpec := &ebpf.MapSpec{Name: "cordon_run", Type: ebpf.RingBuf, MaxEntries: ringSize}
	var ringNew, filterNew bool
	if s.ring, ringNew, err = inner(p.rings, n, ringSpec); err != nil {
		return nil, err
	}
	if s.filter, filterNew, err = inner(p.filters, n, filterSpec()); err != nil {
		s.ring.Close()
		return nil, err
	}
	// A slot made now, or whose ring buffer has another size, pays the grace periods;
	// the two updates side by side end about together.
	ferr := make(chan error, 1)
	go func() {
		if !filterNew {
			ferr <- nil
			return
		}
		ferr <- p.filters.Update(n, s.filter, ebpf.UpdateAny)
	}()
	var rerr error
	if ringNew {
		rerr = p.rings.Update(n, s.ring, ebpf.UpdateAny)
	}
	if err := errors.Join(rerr, <-ferr); err != nil {
		s.close()
		return nil, err
	}
	if s.rd, err = ringbuf.NewReader(s.ring); err != nil {
		s.close()
		return nil, err
	}
	s.drained = drainRing(s.rd)
	return s, nil
}

// inner opens the map outer holds at n, or makes one from spec when it holds none or one
// that spec does not describe (fresh: outer is still to be updated).
func inner(outer *ebpf.Map, n uint32, spec *ebpf.MapSpec) (m *ebpf.Map, fresh bool, err error) {
	var id ebpf.MapID
	err = outer.Lookup(n, &id)
	if err == nil {
		m, err = ebpf.NewMapFromID(id)
		if err == nil && m.Type() == spec.Type && m.MaxEntries() == spec.MaxEntries {
			return m, false, nil
		}
		if m != nil {
			m.Close()
		}
	}
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	m, err = ebpf.NewMap(spec)
	return m, true, err
}

// drainRing reads and drops every record in rd's ring buffer, and counts them.
func drainRing(rd *ringbuf.Reader) uint64 {
	var n uint64
	var rec ringbuf.Record
	rd.SetDeadline(time.Now())
	for rd.ReadInto(&rec) == nil {
		n++
	}
	return n
}

// keptSlots is how many slots stay made between runs: a slot numbered from keptSlots
// on, made when more runs than that were monitored at once, is removed by its holder's
// release, so a burst of runs does not keep 4 MiB of ring buffer per run it had for
// ever. Claims take the lowest free number, so the kept ones are the ones reused.
const keptSlots = 8

// release frees s once its run has left and its ring buffer is drained (Close): the
// filter is emptied, then the claim given up, so that the next holder finds the slot
// clean (it drains and refills it anyway). Only a slot past keptSlots changes a map of
// maps: its ring buffer and filter are removed (side by side, one grace period)
// before the claim is given up, so the next holder of the number makes new ones.
func (p *pinned) release(s *slot) error {
	if !p.holds(s) {
		// Taken by another run (a sweep that took this cordon for gone): its filter
		// and ring buffer are that run's now, and are left alone.
		return p.drop(s)
	}
	errs := []error{refill(s.filter, nil)}
	if s.n >= keptSlots {
		ferr := make(chan error, 1)
		go func() { ferr <- p.filters.Delete(s.n) }()
		errs = append(errs, keyGone([]error{p.rings.Delete(s.n), <-ferr}))
	}
	if err := p.drop(s); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("monitor: releasing slot %d: %w", s.n, err)
	}
	return nil
}

// drop gives up s's claim if it is still s's own (a claim is only taken from a cordon
// that is gone) and closes what s holds.
func (p *pinned) drop(s *slot) error {
	defer s.close()
	var c monitorClaim
	if err := p.claims.Lookup(s.n, &c); err != nil || c != s.claim {
		return keyGone([]error{err})
	}
	return keyGone([]error{p.claims.Delete(s.n)})
}

// holds reports whether s's claim is still the one in claims.
func (p *pinned) holds(s *slot) bool {
	var c monitorClaim
	return p.claims.Lookup(s.n, &c) == nil && c == s.claim
}

// keyGone joins errs, dropping those that say an entry was not there (gc, or a
// failed registration, took it already).
func keyGone(errs []error) error {
	for i, err := range errs {
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			errs[i] = nil
		}
	}
	return errors.Join(errs...)
}
