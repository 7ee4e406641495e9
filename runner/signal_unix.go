//go:build unix

package runner

import (
	"os"
	"syscall"
)

// SignalError is the cancellation cause when cordon itself received a signal.
type SignalError struct{ Sig os.Signal }

func (e SignalError) Error() string { return "received " + e.Sig.String() }

// Signal returns the signal received.
func (e SignalError) Signal() os.Signal { return e.Sig }

func signalNumber(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return int(n)
	}
	return 2
}
