//go:build unix

package linux

import (
	"time"

	"golang.org/x/sys/unix"
)

// ProcessCPU is the CPU time, user and system, this process has used so far.
func ProcessCPU() (time.Duration, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
