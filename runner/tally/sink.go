package tally

import (
	"sync"
	"time"

	"github.com/cordonhq/cordon/internal/event"
)

// Sink stamps events that do not name a command with the one running now (in a
// session with concurrent commands: the most recently started one still running), so a
// reviewer can join a denied connection to the command that tried it, remembers each
// running command's denied destinations, and copies every event to an optional second
// sink.
//
// Every net.deny and net.allow passes through it once, so it holds the run's budgets of
// them (budget.go): past its kind's budget an attempt is counted in its command's tally
// of that kind instead of being passed on, and the tally is passed on as a
// net.deny.summary or net.allow.summary at most once a second (one timer for both), at
// the command's end (Flush) and at the run's end (Close).
//
// A Sink is safe for concurrent use by multiple goroutines: the egress proxy, the
// monitor, the gates and the broker emit while the run begins and ends commands.
type Sink struct {
	next event.Sink
	copy event.Sink       // may be nil
	now  func() time.Time // or nil for time.Now
	// schedule runs f after d and returns a function that cancels it; nil means
	// time.AfterFunc. Tests replace it to fire the summary timer themselves.
	schedule func(d time.Duration, f func()) (stop func() bool)

	mu      sync.Mutex             // mu guards the fields below.
	active  []string               // running commands, oldest first
	denies  map[string]*cmdDenials // cmd id -> its net.deny bodies, while it runs
	cgroups map[uint64]string      // a session command's cgroup id -> its cmd id
	alerted alertCounts            // monitor alerts, per command and for the run
	budgets budgets                // the run's itemized net.deny and net.allow lines and the tallies past them
	stop    func() bool            // cancels the summary timer; nil when none is armed

	// flushMu is held from taking tallies off the budget to passing the last of them
	// on (tick, Flush, Close), before mu: Close does not return while a summary
	// the timer took is still on its way to the log, which teardown seals right after
	// (a summary passed to a sealed log would be dropped, its denials neither itemized
	// nor counted), and a command's summary precedes its cmd.end.
	flushMu sync.Mutex
}

// New returns a sink that passes events on to next and a copy of each to copy (nil
// for none), on the clock now (nil for time.Now).
func New(next, copy event.Sink, now func() time.Time) *Sink {
	return &Sink{next: next, copy: copy, now: now}
}

// Denial is one destination the egress proxy refused a command, as the command may be
// told: nothing in it comes from the contract but the category.
type Denial struct {
	Destination   string // "host:port", as the command asked for it
	Reason        string // the kind of denial, e.g. "not in network.allow"
	SuggestedRule string // the rule that would allow it, "" when none could
}

// cmdDenials is what a running command's result says of its denials: the first
// maxDeniesKept bodies, and how many there were in all.
type cmdDenials struct {
	kept []event.NetBody
	n    int
}

// JoinCgroup attributes events from cgroup id to command cmd: an alert from a process in
// that cgroup is the command's, whichever command is current.
func (s *Sink) JoinCgroup(id uint64, cmd string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cgroups == nil {
		s.cgroups = map[uint64]string{}
	}
	s.cgroups[id] = cmd
}

// Begin marks command id running: events that name no command are stamped with it while
// it is the most recently started one still running.
func (s *Sink) Begin(id string) {
	s.mu.Lock()
	s.active = append(s.active, id)
	s.mu.Unlock()
}

// End marks command id ended and forgets its denials and alerts: take them (Denied,
// Alerts) and write its summaries (Flush) before.
func (s *Sink) End(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, a := range s.active {
		if a == id {
			s.active = append(s.active[:i], s.active[i+1:]...)
			break
		}
	}
	delete(s.denies, id)
	s.alerted.forget(id)
}

// Running lists the commands running now, oldest first.
func (s *Sink) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.active...)
}

// Current is the most recently started command still running, or "".
func (s *Sink) Current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.active) == 0 {
		return ""
	}
	return s.active[len(s.active)-1]
}

// Denied returns the destinations ("host:port") denied to command id so far, one per
// denial, the same explained, one per destination in the order first denied, and how
// many more denials it had than targets lists (past maxDeniesKept).
func (s *Sink) Denied(id string) ([]string, []Denial, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var (
		targets []string
		denials []Denial
		seen    = map[string]bool{}
	)
	d := s.denies[id]
	if d == nil {
		return nil, nil, 0
	}
	for _, b := range d.kept {
		dest := netTarget(b)
		targets = append(targets, dest)
		if seen[dest] {
			continue
		}
		seen[dest] = true
		reason := b.Category
		if reason == "" {
			reason = deniedByContract
		}
		denials = append(denials, Denial{Destination: dest, Reason: reason, SuggestedRule: b.SuggestedRule})
	}
	return targets, denials, d.n - len(d.kept)
}

// Alerts returns the monitor alerts of command id so far, or the whole run's when id is
// "", once per category, target and syscall in the order first seen.
func (s *Sink) Alerts(id string) []Alert {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.alerted.list(id)
}

// Emit implements event.Sink.
func (s *Sink) Emit(e event.Event) {
	s.mu.Lock()
	if a, ok := e.Body.(event.SyscallAlertBody); ok && e.Cmd == "" {
		e.Cmd = s.cgroups[a.Cgroup] // exact: the process was in that command's cgroup
	}
	if e.Cmd == "" && len(s.active) > 0 {
		e.Cmd = s.active[len(s.active)-1]
	}
	if a, ok := e.Body.(event.SyscallAlertBody); ok {
		s.alerted.add(e.Cmd, a)
	}
	if e.Type == event.NetDeny {
		b, _ := e.Body.(event.NetBody)
		s.keepDenied(e.Cmd, b)
	}
	if budget := s.budgets.of(e.Type); budget != nil {
		b, _ := e.Body.(event.NetBody)
		if now := s.clock(); !budget.itemize(now) {
			if budget.count(e.Cmd, b, now) && s.stop == nil {
				s.armLocked(now.Add(summaryEvery))
			}
			s.mu.Unlock()
			return
		}
	}
	s.mu.Unlock()
	s.pass(e)
}

// pass hands e on to the log and the copy.
func (s *Sink) pass(e event.Event) {
	s.next.Emit(e)
	if s.copy != nil {
		s.copy.Emit(e)
	}
}

// keepDenied remembers a denial of command cmd for its result. s.mu is held.
func (s *Sink) keepDenied(cmd string, b event.NetBody) {
	if cmd == "" {
		return
	}
	if s.denies == nil {
		s.denies = map[string]*cmdDenials{}
	}
	d := s.denies[cmd]
	if d == nil {
		d = &cmdDenials{}
		s.denies[cmd] = d
	}
	d.n++
	if len(d.kept) < maxDeniesKept {
		d.kept = append(d.kept, b)
	}
}

// Flush writes command cmd's tallies of attempts past the budgets now, and any
// other that is due, so that its summaries precede its cmd.end.
func (s *Sink) Flush(cmd string) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	due, _ := s.budgets.take(s.clock(), &cmd, true)
	s.mu.Unlock()
	for _, e := range due {
		s.pass(e)
	}
}

// Close writes every tally left, as the run ends (once the proxy is closed), and stops
// the summary timer; any attempt after it is itemized. It is idempotent.
func (s *Sink) Close() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	due, _ := s.budgets.take(s.clock(), nil, true)
	s.budgets.unlimited = true
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
	s.mu.Unlock()
	for _, e := range due {
		s.pass(e)
	}
}

// armLocked arms the summary timer to fire at at. s.mu is held.
func (s *Sink) armLocked(at time.Time) {
	schedule := s.schedule
	if schedule == nil {
		schedule = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	s.stop = schedule(at.Sub(s.clock()), s.tick)
}

// tick writes the tallies that are due, and arms the timer for the next one.
func (s *Sink) tick() {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.mu.Lock()
	if s.budgets.unlimited {
		s.mu.Unlock()
		return // closed meanwhile
	}
	now := s.clock()
	due, next := s.budgets.take(now, nil, false)
	s.stop = nil
	if !next.IsZero() {
		s.armLocked(next)
	}
	s.mu.Unlock()
	for _, e := range due {
		s.pass(e)
	}
}

func (s *Sink) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// maxDeniesKept bounds the net.deny bodies kept per running command for its result
// (runner.ExecResult.DeniedEgress and Denied). The sandbox makes denials as fast as it
// can connect (a flood past MaxConns is one deny per connection, about 12,000 a
// second): kept without bound they grew cordon's memory by some 700 bytes each until it
// ran out. Past this many the result lists no more, and counts them in
// runner.ExecResult.DeniedMore; the log itemizes them, or counts them in
// net.deny.summary lines past its budget.
const maxDeniesKept = 1000
