//go:build !linux

package linux

import (
	"os"
	"runtime"

	"golang.org/x/net/bpf"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// LoadSeccompThread fails: seccomp is a Linux facility.
func LoadSeccompThread(prog []bpf.RawInstruction) error {
	return errdefs.Unavailablef("seccomp: unimplemented on %s", runtime.GOOS)
}

// LoadSeccompListenerThread fails: seccomp is a Linux facility.
func LoadSeccompListenerThread(prog []bpf.RawInstruction) (*os.File, error) {
	return nil, errdefs.Unavailablef("seccomp: unimplemented on %s", runtime.GOOS)
}

// SeccompCall is a held system call as a listener receives it.
type SeccompCall struct {
	ID   uint64
	PID  uint32
	Nr   int32
	Args [6]uint64
}

// SeccompListener is unimplemented off Linux.
type SeccompListener struct{}

// NewSeccompListener fails: seccomp is a Linux facility. It closes f.
func NewSeccompListener(f *os.File) (*SeccompListener, error) {
	f.Close()
	return nil, errdefs.Unavailablef("seccomp: unimplemented on %s", runtime.GOOS)
}

// SyncWakeUp fails: seccomp is a Linux facility.
func (l *SeccompListener) SyncWakeUp() error {
	return errdefs.Unavailablef("seccomp: unimplemented on %s", runtime.GOOS)
}

// Receive fails: seccomp is a Linux facility.
func (l *SeccompListener) Receive() (SeccompCall, error) {
	return SeccompCall{}, errdefs.Unavailablef("seccomp: unimplemented on %s", runtime.GOOS)
}

// Continue fails: seccomp is a Linux facility.
func (l *SeccompListener) Continue(id uint64) error {
	return errdefs.Unavailablef("seccomp: unimplemented on %s", runtime.GOOS)
}

// Close does nothing.
func (l *SeccompListener) Close() error { return nil }

// SeccompListenerSupported says seccomp is a Linux facility.
func SeccompListenerSupported() string { return "seccomp is a Linux facility" }

// IsSeccompListener reports false: seccomp is a Linux facility.
func IsSeccompListener(f *os.File) bool { return false }
