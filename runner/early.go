package runner

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cordonhq/cordon/internal/trace"
)

// setUpEarly runs what a one-command run needs in place before its command runs,
// beside the sandbox building itself: it attaches the monitor (the sandbox's cgroup
// exists and holds nothing of the command yet) and, at the same time, takes the
// workspace's baseline (snapshot: the monitor's registration mostly waits in the
// kernel, the baseline mostly reads), then, once both succeeded, writes cmd.start
// (begin): a command whose monitor could not attach never has one.
// ready is the sandbox's Process.Ready: the command waits on it, and runs only when
// everything succeeded. wait waits for the whole setup, whatever became of the
// sandbox, and returns its error: nothing it started is still running once wait has
// returned, and what it acquired is in r.undo, undone in order by teardown. A panic in
// it is returned as an error, so that teardown still runs.
//
// With a barrier (r.bar), the command does not wait for the baseline: ready returns
// once the monitor is attached and cmd.start written, and the barrier holds the
// command's calls that may change a file until the baseline is complete (then
// released). A baseline that fails then stops the command (abort) and shuts the
// barrier, so that nothing it holds goes through.
func (r *run) setUpEarly(ctx context.Context, snapshot, begin func() error, abort context.CancelCauseFunc) (ready func(context.Context) error, wait func() error) {
	done, started := make(chan struct{}), make(chan struct{})
	var err, startErr error
	bar := r.bar
	go func() {
		defer close(done)
		startedOnce := false
		start := func(e error) {
			if !startedOnce {
				startedOnce, startErr = true, e
				close(started)
			}
		}
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
			start(err)
		}()
		attached := make(chan error, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					attached <- fmt.Errorf("panic: %v", p)
				}
			}()
			sp := trace.Begin("monitor.attach")
			defer sp.End()
			attached <- r.attachMonitor(ctx)
		}()
		if bar == nil {
			serr := snapshot()
			if err = errors.Join(<-attached, serr); err != nil {
				return
			}
			err = r.beginEarly(begin)
			return
		}
		snapped := make(chan error, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					snapped <- fmt.Errorf("panic: %v", p)
				}
			}()
			snapped <- snapshot()
		}()
		if err = <-attached; err == nil {
			err = r.beginEarly(begin)
		}
		start(err)
		serr := <-snapped
		if serr == nil && err == nil {
			bar.release()
			return
		}
		bar.shut()
		if serr != nil && err == nil && !errors.Is(serr, context.Canceled) {
			abort(serr) // the command started: it is stopped
		}
		err = errors.Join(err, serr)
	}()
	ready = func(rctx context.Context) error {
		select {
		case <-started:
			return startErr
		case <-rctx.Done():
			return rctx.Err()
		}
	}
	wait = func() error {
		<-done
		return err
	}
	return ready, wait
}

// beginEarly writes cmd.start (begin), after the tests' hook.
func (r *run) beginEarly(begin func() error) error {
	if r.o.beforeCommand != nil {
		if err := r.o.beforeCommand(); err != nil {
			return err
		}
	}
	return begin()
}

// startBarrier gives the run's command a barrier when it can have one (see
// barrier.go); else it says why the command waits for the baseline.
func (r *run) startBarrier() {
	if why := r.wantBarrier(); why != "" {
		r.o.Log.Debug("the command waits for the workspace's baseline", "why", why)
		return
	}
	root, err := os.Stat(r.plan.Workspace)
	if err != nil {
		r.o.Log.Debug("the command waits for the workspace's baseline", "why", err)
		return
	}
	r.bar = newBarrier(r.o.Log)
	r.bar.root = root
	r.barPtr.Store(r.bar) // for the gates' goroutines (afterBaseline)
}

// attachMonitor starts the monitor on the sandbox's cgroup and registers its undo.
func (r *run) attachMonitor(ctx context.Context) error {
	if err := r.startMonitor(ctx); err != nil {
		return err
	}
	r.undo.add("stopping the monitor", func(context.Context) error { return r.stopMonitor(r.o.Log) })
	return nil
}
