package monitor

import "fmt"

// What the monitor does not log must be in the log: a run that floods its ring buffer
// (the kernel drops what does not fit) or raises more distinct alerts than maxAlerts
// could otherwise hide a deviation behind the flood, with nothing in the audit log to
// say so. Each gap is one alert of its own (category CatGap), raised once per run; in
// kill mode it stops the run like any other.

// raise emits a, unless it repeats an alert already emitted or the run is past
// maxAlerts (then, once, an alert saying so).
func (m *Monitor) raise(a Alert, key alertKey) {
	if _, dup := m.seen[key]; dup {
		m.suppressed.Add(1)
		return
	}
	if len(m.seen) >= maxAlerts {
		m.suppressed.Add(1)
		if !m.capped {
			m.capped = true
			m.emitAlert(m.gap(fmt.Sprintf("the run raised %d distinct alerts: later deviations are counted, not logged", maxAlerts)))
		}
		return
	}
	m.seen[key] = struct{}{}
	m.emitAlert(a)
}

// checkLost raises, once, the alert for events the kernel dropped (lost so far).
func (m *Monitor) checkLost(lost uint64) {
	if lost == 0 || m.lostRaised {
		return
	}
	m.lostRaised, m.lostAlerted = true, lost
	m.emitAlert(m.gap(fmt.Sprintf("the run's ring buffer was full: %d events were lost, and any of them may have been a deviation", lost)))
}

// totalLost raises, at the run's end, the alert for the events lost after the first
// loss was alerted: that alert's count is what was lost when it was seen, and a flood
// that goes on loses many times that, which the log must say too.
func (m *Monitor) totalLost(lost uint64) {
	if !m.lostRaised || lost <= m.lostAlerted {
		return
	}
	m.emitAlert(m.gap(fmt.Sprintf("the run's ring buffer was full: %d events were lost in all (%d when first seen), and any of them may have been a deviation", lost, m.lostAlerted)))
}

func (m *Monitor) gap(reason string) Alert {
	return Alert{Cgroup: m.opts.CgroupID, Rule: RuleSyscall, Category: CatGap, Reason: reason, Action: ActionAlert}
}

func (m *Monitor) emitAlert(a Alert) {
	m.alerts.Add(1)
	if m.opts.OnViolation != nil && m.violated.CompareAndSwap(false, true) {
		m.opts.OnViolation(a)
	}
	emit(m.opts.Events, a)
}
