//go:build !linux

package runner

// liveWatch is Linux's (fanotify); elsewhere only the end-of-command quarantine runs.
type liveWatch struct{}

func mayWatch() bool { return false }

func (r *run) watchRepositories() error { return nil }

func (r *run) takeLive() []string { return nil }

func (r *run) stopWatch() {}

func (r *run) stopWatchSoon() {}

func (r *run) waitWatchClosed() {}

func sweepRepositories(string, int64) []string { return nil }
