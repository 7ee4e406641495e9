package linux

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ErrFileClock: the file clock did not move within FileClock's wait.
var ErrFileClock = errors.New("the file clock did not move")

// FileClock returns the kernel's clock for file times, read in dir: a change time
// past that of every change made before the call, and at or before that of every
// change made after it returns. File times come from a coarse clock (a tick, up to
// 10 ms, behind the one time.Now reads), so a wall-clock time read at a run's start
// cannot tell a change made just before it from one made just after. FileClock makes
// a probe file in dir (removed before it returns) and changes its mode until its
// change time moves past the first it had: a tick at most (ErrFileClock past 200 ms).
func FileClock(dir string) (int64, error) {
	f, err := os.CreateTemp(dir, ".cordon-clock-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	first := st.Ctim.Nano()
	deadline := time.Now().Add(200 * time.Millisecond)
	for mode := uint32(0o400); time.Now().Before(deadline); mode ^= 0o200 {
		if err := unix.Fchmod(fd, mode); err != nil {
			return 0, err
		}
		if err := unix.Fstat(fd, &st); err != nil {
			return 0, err
		}
		if now := st.Ctim.Nano(); now > first {
			return now, nil
		}
		time.Sleep(200 * time.Microsecond)
	}
	return 0, ErrFileClock
}
