//go:build !linux

package linux

// UnignoreSignals is Linux's (process 1 of a Linux sandbox); elsewhere it does nothing.
func UnignoreSignals() {}
