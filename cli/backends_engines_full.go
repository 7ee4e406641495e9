//go:build !noengines || !linux

package cli

// delegate is a no-op in the full build: it has the engines itself.
func delegate(string) bool { return false }

// execEngines is never called in the full build (no backend has reexec set).
func execEngines() error { return nil }
