//go:build !linux

package runner

func removeCgroup(string) error { return nil }

func gcIdleCgroups(string) {}

// gcUIDs: no sandbox runs as a leased uid off Linux.
func gcUIDs() error { return nil }
