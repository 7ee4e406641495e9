package runner

import (
	"context"
	"errors"
	"fmt"

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
func (r *run) setUpEarly(ctx context.Context, snapshot, begin func() error) (ready func(context.Context) error, wait func() error) {
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v", p)
			}
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
		serr := snapshot()
		if err = errors.Join(<-attached, serr); err != nil {
			return
		}
		if r.o.beforeCommand != nil {
			if err = r.o.beforeCommand(); err != nil {
				return
			}
		}
		err = begin()
	}()
	ready = func(rctx context.Context) error {
		select {
		case <-done:
			return err
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

// attachMonitor starts the monitor on the sandbox's cgroup and registers its undo.
func (r *run) attachMonitor(ctx context.Context) error {
	if err := r.startMonitor(ctx); err != nil {
		return err
	}
	r.undo.add("stopping the monitor", func(context.Context) error { return r.stopMonitor(r.o.Log) })
	return nil
}
