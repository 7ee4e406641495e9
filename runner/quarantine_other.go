//go:build !linux

package runner

import (
	"context"

	"github.com/cordonhq/cordon/audit/fsdiff"
)

// liveWatch is Linux's (fanotify); elsewhere only the end-of-command quarantine runs.
type liveWatch struct{}

func mayWatch() bool { return false }

func (r *run) watchRepositories() error { return nil }

func (r *run) takeLive() []string { return nil }

func (r *run) stopWatch() {}

func (r *run) stopWatchSoon() {}

func (r *run) waitWatchClosed() {}

func sweepRepositories(string, int64) []string { return nil }

func (r *run) wantsChanges() bool { return false }

func (r *run) watchOpens() {}

func (r *run) takeChanges() { r.stopWatchSoon() }

func (r *run) noChanges(string) {}

func (r *run) nothingChanged() string { return "no change set" }

func (r *run) directDiff(ctx context.Context, t *fsdiff.Tracker, _ bool, _ *window) (*fsdiff.Result, error) {
	return t.Diff(ctx)
}

// dropPrivileges is Linux's: file capabilities, and the write through a shared
// mapping that leaves a file its privileges, are what it answers.
func (r *run) dropPrivileges(*fsdiff.Result) {}

func (r *run) takeSet() (fsdiff.Watched, string) {
	r.sw.takes++
	return fsdiff.Watched{}, "no change set"
}

func (r *run) sessionOpens(bool) error { return nil }

func (r *run) idle() {}

func (r *run) busy() {}

func (r *run) stopSets(string) {}
