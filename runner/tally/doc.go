// Package tally is a run's event tally: the [Sink] every event of a run passes through
// on its way to the audit log, and what it keeps of them for the run's results.
//
// It stamps an event that names no command with the command running now (or, for a
// monitor alert, the command whose cgroup raised it); it keeps each running command's
// denied destinations ([Denial]) and the monitor alerts of each command and of the run
// ([Alert]), bounded; and it holds the run's budgets of net.deny and net.allow lines,
// past which a flood is counted in net.deny.summary and net.allow.summary lines
// (docs/audit.md) rather than itemized.
//
// It imports only internal/event: package runner owns the run's lifecycle and tells the
// Sink when a command begins ([Sink.Begin]) and ends ([Sink.Flush], [Sink.End]) and when
// the run ends ([Sink.Close]).
package tally
