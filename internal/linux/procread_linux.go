package linux

import (
	"errors"

	"golang.org/x/sys/unix"
)

// ErrProcFileLong: the /proc file filled the whole buffer, so it may go on past it.
var ErrProcFileLong = errors.New("longer than the buffer")

// ReadProcFile reads a /proc file of one page or so into buf with a single open, read
// and close, and returns the bytes read. /proc's generated files have no size to stat
// and are made whole on the first read, so one read of a buffer the caller reuses is
// all they need: a scan of every process's status this way costs less than half of
// os.ReadFile's (which stats, then reads into a buffer it grows). A file that fills buf
// is [ErrProcFileLong], not a silent cut.
func ReadProcFile(path string, buf []byte) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	for {
		n, err := unix.Read(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == len(buf) {
			return nil, ErrProcFileLong
		}
		return buf[:n], nil
	}
}
