package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/trace"
	"github.com/cordonhq/cordon/monitor"
)

// monitorKill is the cancellation cause when monitor.on_violation: kill stops the run.
type monitorKill struct{ alert monitor.Alert }

func (m monitorKill) Error() string { return "stopped by the monitor: " + m.alert.String() }

// startMonitor attaches the eBPF monitor to the sandbox's cgroup. In required mode a
// monitor that cannot load refuses the run; in best-effort mode it warns and runs.
func (r *run) startMonitor(ctx context.Context) error {
	mode := r.plan.Monitor.Mode
	if mode == contract.MonitorOff {
		return nil
	}
	id, err := r.sb.CgroupID()
	if id == 0 && err == nil {
		err = errors.New("the sandbox has no cgroup of its own to watch")
	}
	var m *monitor.Monitor
	if id != 0 {
		m, err = monitor.Start(ctx, monitor.Options{
			CgroupID: id, Nested: true, Profile: monitor.FromPlan(r.plan), Events: r.sink,
			OnViolation: r.onViolation,
		})
	}
	if err != nil {
		if mode == contract.MonitorRequired {
			return errdefs.Unavailablef("monitor.mode is required but the syscall monitor cannot run: %w", err)
		}
		fmt.Fprintf(r.o.Stderr, "cordon: warning: the syscall monitor is not running (monitor.mode best-effort): %v\n", err)
		return nil
	}
	r.mon = m
	return nil
}

// onViolation is called once, with the first alert. Under on_violation: kill it stops
// the command; the alert itself is already in the log.
func (r *run) onViolation(a monitor.Alert) {
	if r.plan.Monitor.OnViolation != contract.ViolationKill {
		return
	}
	r.stopAll(&monitorKill{alert: a})
}

// stopAll stops every running command, and every later one, with cause (the first
// cause stands).
func (s *monitorState) stopAll(cause error) {
	s.killMu.Lock()
	defer s.killMu.Unlock()
	if s.killedBy == nil {
		s.killedBy = cause
	}
	for _, stop := range s.stops {
		stop(s.killedBy)
	}
}

// monitorState is the run's monitor and its kill switch.
type monitorState struct {
	mon    *monitor.Monitor
	closed *monitor.Monitor // mon once stopMonitor closed it: its release may be under way

	killMu   sync.Mutex                      // killMu guards the fields below.
	stops    map[int]context.CancelCauseFunc // the running commands' kill switches
	nextStop int
	killedBy error // a *monitorKill or a *maskKill
}

// armKill installs a function that stops a running command, and fires it at once if
// the monitor already asked for a kill (in a session, a kill stops every later command
// too). The returned function uninstalls it.
func (s *monitorState) armKill(stop context.CancelCauseFunc) (disarm func()) {
	s.killMu.Lock()
	defer s.killMu.Unlock()
	if s.stops == nil {
		s.stops = map[int]context.CancelCauseFunc{}
	}
	id := s.nextStop
	s.nextStop++
	s.stops[id] = stop
	if s.killedBy != nil {
		stop(s.killedBy)
	}
	return func() {
		s.killMu.Lock()
		delete(s.stops, id)
		s.killMu.Unlock()
	}
}

// stopMonitor detaches the monitor after reading what is left in its ring buffer, and
// writes its counters to log at debug level (the records dropped as the slot's earlier
// holder's among them). It is idempotent.
func (s *monitorState) stopMonitor(log *slog.Logger) error {
	if s.mon == nil {
		return nil
	}
	err := s.mon.Close()
	st := s.mon.Stats()
	s.mon, s.closed = nil, s.mon
	log.Debug("monitor stopped", "events", st.Events, "lost", st.Lost, "filtered", st.Filtered,
		"alerts", st.Alerts, "suppressed", st.Suppressed, "malformed", st.Malformed,
		"unresolved", st.Unresolved, "foreign", st.Foreign)
	if st.Lost > 0 {
		err = errors.Join(err, fmt.Errorf("the monitor lost %d events (ring buffer full)", st.Lost))
	}
	return err
}

// waitMonitorReleased waits until the closed monitor's entries are out of the shared
// programs' maps (monitor.Monitor.Released: Close leaves that to the background, beside
// the diff and the log's last lines), and says when that failed.
func (r *run) waitMonitorReleased() {
	if r.closed == nil {
		return
	}
	defer trace.Begin("monitor.released").End()
	if err := r.closed.ReleaseErr(); err != nil {
		r.o.Log.Debug("the monitor's entries stay for the next run to sweep", "err", err)
	}
	r.closed = nil
}
