//go:build !linux

package runner

func removeCgroup(string) error { return nil }

func gcIdleCgroups(string) {}

// GCUIDs: no sandbox runs as a leased uid off Linux.
func GCUIDs() ([]int, error) { return nil, nil }
