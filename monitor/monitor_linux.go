package monitor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf/ringbuf"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/owner"
	"github.com/cordonhq/cordon/internal/paths"
)

// Regenerate with monitor/generate.sh, which installs the pinned compiler and checks.
//go:generate go tool bpf2go -tags linux -type event -type sc -type run -type claim monitor bpf/monitor.c -- -I bpf/include -Wall -Werror

// Monitor is a running monitor: one run's registration with the shared BPF programs,
// its own ring buffer, and the goroutine that reads it. Its methods are safe for
// concurrent use.
type Monitor struct {
	opts    Options
	chk     checker
	pins    *pinned // the shared programs' maps the run is registered in
	slot    *slot   // the run's ring buffer and path filter (filter.go; empty: every open is sent)
	rd      *ringbuf.Reader
	done    chan struct{} // closed when the reader goroutine returns
	flushed chan struct{} // one token per ErrFlushed the reader saw

	// drainMu serialises ring buffer flushes (drain and Close), so that two never
	// coalesce into one ErrFlushed.
	drainMu sync.Mutex
	closing atomic.Bool

	events, alerts, suppressed, malformed, unresolved, foreign atomic.Uint64
	violated                                                   atomic.Bool

	// seen holds the alerts already emitted; only the reader goroutine uses it (and
	// Close once the reader is gone), as it does capped and lostRaised (gaps_linux.go).
	seen        map[alertKey]struct{}
	capped      bool
	lostRaised  bool
	lostAlerted uint64 // the count the lost alert gave

	closeOnce  sync.Once
	closeErr   error
	atEnd      monitorRun    // the run's counters when it left
	released   chan struct{} // closed once Close's release of the run's entries is done
	releaseErr error         // written before released is closed
}

// maxAlerts caps the distinct alerts one run emits, so that a workload cannot flood the
// audit log; the rest are counted in Stats.Suppressed.
const maxAlerts = 10000

// Start registers the run's cgroup with the monitor's programs (loading, attaching
// and pinning them first if no earlier run left them on the host) and starts reading
// its events. The run's cgroup must exist and no process of the run should be in it
// yet; ctx bounds only the start. The monitor runs until [Monitor.Close].
//
// When BPF cannot be used it returns an error wrapping errdefs.ErrUnavailable that says
// why (not root, no BTF, no tracefs, the verifier's refusal); monitor.mode: required
// turns that into exit 125, best-effort into a warning.
func Start(ctx context.Context, opts Options) (*Monitor, error) {
	if opts.CgroupID == 0 {
		return nil, errors.New("monitor: no cgroup id")
	}
	if err := preflight(); err != nil {
		return nil, err
	}
	cfg, err := kernelConfig(opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m := &Monitor{
		opts:     opts,
		chk:      checker{prof: opts.Profile}, // risky: scanned by the reader (read)
		done:     make(chan struct{}),
		flushed:  make(chan struct{}, 1),
		released: make(chan struct{}),
		seen:     map[alertKey]struct{}{},
	}
	size := opts.ringSize
	if size == 0 {
		size = 4 << 20
	}
	linux.RaiseMemlock()
	// A profile the filter cannot represent leaves the run with an empty one: every
	// open is then sent and compared in user space, never dropped.
	entries, ok := filterEntries(&m.chk.prof)
	if m.pins, m.slot, err = join(ctx, paths.BPFRoot(), newEntry(cfg, owner.Self()), size, entries, ok); err != nil {
		return nil, err
	}
	m.rd = m.slot.rd
	m.foreign.Store(m.slot.drained)
	go m.read()
	return m, nil
}

// How long an open or connect may wait in the ring buffer before the reader sees it. The
// programs wake the reader at once for execs and high-signal syscalls, for an open or a
// connect only when WAKE_BYTES are waiting or the run's last wakeup is half a poll old
// (bpf/monitor.c, submit); after reading what a wakeup announced, the reader polls again
// within one poll, and once a poll finds nothing it sleeps until woken (idlePoll only
// bounds how late a count of lost events is noticed). A reader polling every 10 ms cost
// 15 ms of CPU a second with nothing to read, several times that beside a busy workload
// (docs/monitor.md, "Benchmarks"), so only kill mode, where the alert stops the run,
// polls that often.
const (
	killPoll  = 10 * time.Millisecond
	alertPoll = 100 * time.Millisecond
	idlePoll  = time.Second
)

// pollInterval is the run's poll: killPoll when an alert stops the run, else alertPoll.
func pollInterval(opts Options) time.Duration {
	if opts.OnViolation != nil {
		return killPoll
	}
	return alertPoll
}

func (m *Monitor) read() {
	defer close(m.done)
	// Scanned here, not in Start: the events wait in the ring buffer meanwhile, and the
	// run's start does not wait for a walk of the host's bin directories.
	m.chk.risky = scanRisky(riskyDirs)
	poll := pollInterval(m.opts)
	idle := false
	var rec ringbuf.Record
	for {
		if idle {
			m.rd.SetDeadline(time.Now().Add(idlePoll))
		} else {
			m.rd.SetDeadline(time.Now().Add(poll))
		}
		err := m.rd.ReadInto(&rec)
		switch {
		case err == nil:
			idle = false
			m.handle(rec.RawSample)
			if m.events.Load()%1024 == 0 { // a flood never lets the deadline pass
				m.checkLost(m.pins.counters(m.opts.CgroupID).Lost)
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Every open sent since the last wakeup has been read: the next one wakes.
			idle = true
			m.checkLost(m.pins.counters(m.opts.CgroupID).Lost)
		case errors.Is(err, ringbuf.ErrFlushed):
			// A drain has every event before it handled, and any loss alerted.
			m.checkLost(m.pins.counters(m.opts.CgroupID).Lost)
			select {
			case m.flushed <- struct{}{}:
			default:
			}
			if m.closing.Load() {
				return
			}
		default: // closed, or the ring buffer failed
			return
		}
	}
}

type alertKey struct {
	pid                    int
	rule                   Rule
	syscall, target, cause string
}

func (m *Monitor) handle(raw []byte) {
	r, err := decodeRecord(raw)
	if err != nil {
		m.malformed.Add(1)
		return
	}
	if r.Ticket != m.slot.ticket || r.Run != m.slot.claim.Cgroup {
		// Sent for the slot's earlier holder by a program that found that run before
		// it left: not this run's. The ticket and the slot are read from the run's
		// entry in runs, whose memory the kernel may hand to this run's entry while
		// such a program still reads it; the run's cgroup comes from the task's own
		// cgroups, which no reuse changes.
		m.foreign.Add(1)
		return
	}
	m.events.Add(1)
	if m.opts.onRecord != nil {
		m.opts.onRecord(r)
	}
	a, deviates, unresolved := m.chk.check(&r)
	if unresolved {
		m.unresolved.Add(1)
	}
	if !deviates {
		return
	}
	m.raise(a, alertKey{a.PID, a.Rule, a.Syscall, a.Path + a.Addr + a.Detail, a.Reason})
}

// drain returns once every event in the ring buffer when it was called is handled.
func (m *Monitor) drain() {
	m.drainMu.Lock()
	defer m.drainMu.Unlock()
	if m.closing.Load() {
		return
	}
	if m.rd.Flush() != nil {
		return
	}
	select {
	case <-m.flushed:
	case <-m.done:
	}
}

// Stats returns the monitor's counters.
func (m *Monitor) Stats() Stats {
	s := Stats{
		Events:     m.events.Load(),
		Alerts:     m.alerts.Load(),
		Suppressed: m.suppressed.Load(),
		Malformed:  m.malformed.Load(),
		Unresolved: m.unresolved.Load(),
		Foreign:    m.foreign.Load(),
	}
	m.drainMu.Lock()
	defer m.drainMu.Unlock()
	c := m.atEnd
	if !m.closing.Load() {
		c = m.pins.counters(m.opts.CgroupID)
	}
	s.Lost, s.Filtered = c.Lost, c.Filtered
	return s
}

// Close unregisters the run (its cgroup leaves the programs' filter; the programs stay
// attached for the next run, [GC] detaches them), handles the events still in its ring
// buffer, and frees everything the monitor holds (maps, file descriptors), the last of
// it in the background once it returns ([Monitor.Released]). It is
// idempotent. Call it after the last process of the run has exited: an event of a
// process still running may miss the last read.
func (m *Monitor) Close() error {
	m.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		atEnd, err := m.pins.leave(ctx, m.opts.CgroupID)
		errs := []error{err}
		m.drainMu.Lock()
		m.closing.Store(true)
		m.atEnd = atEnd
		m.drainMu.Unlock()
		if err := m.rd.Flush(); err == nil {
			select {
			case <-m.done:
				// What the programs sent after the flush (a program that found the
				// run before it left) is dropped, not left to the slot's next holder.
				m.foreign.Add(drainRing(m.rd))
			case <-time.After(5 * time.Second):
			}
		}
		if err := m.rd.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the ring buffer: %w", err))
		}
		<-m.done
		m.checkLost(m.atEnd.Lost) // the reader is gone: this goroutine is the only one
		m.totalLost(m.atEnd.Lost)
		m.closeErr = errors.Join(errs...)
		go func() {
			defer close(m.released)
			m.releaseErr = m.pins.release(m.slot) // and closes the slot's maps
			m.pins.Close()
		}()
	})
	return m.closeErr
}

// Released is closed once a closed monitor's slot (its ring buffer and path filter) is
// emptied and free for the next run, which Close begins and does not wait for. A
// process that exits before does no harm: the next run's registration sweeps the
// claim of a cordon that is gone, and drains and refills the slot it takes. Its error
// is [Monitor.ReleaseErr].
func (m *Monitor) Released() <-chan struct{} { return m.released }

// ReleaseErr is what releasing the run's entries failed with, once Released is closed.
func (m *Monitor) ReleaseErr() error {
	<-m.released
	return m.releaseErr
}

// riskyDirs are where scanRisky looks for shells, interpreters and relays.
var riskyDirs = []string{"/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/bin", "/sbin"}

// scanRisky finds the risky programs in dirs and returns their identities with all
// their names, so that an exec through another name (a hard link, a symlink) is known.
func scanRisky(dirs []string) map[fileID][]string {
	out := map[fileID][]string{}
	for _, dir := range dirs {
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if Risky(e.Name()) == "" {
				continue
			}
			id, ok := statID(dir + "/" + e.Name())
			if ok && !contains(out[id], e.Name()) {
				out[id] = append(out[id], e.Name())
			}
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
