package linux

import (
	"os"

	"golang.org/x/sys/unix"
)

// WriteMapped writes data at off in f through a shared writable mapping, as a
// program that mmaps a file writes it: no write(2), no FAN_MODIFY. It is here for
// the tests that check such a write reaches the workspace diff.
func WriteMapped(f *os.File, off int64, data []byte) error {
	page := int64(os.Getpagesize())
	start := off / page * page
	m, err := unix.Mmap(int(f.Fd()), start, int(off-start)+len(data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	copy(m[off-start:], data)
	return unix.Munmap(m)
}

// Allocate is fallocate(2) on f with mode.
func Allocate(f *os.File, mode uint32, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), mode, off, n)
}

// MapShared maps the first n bytes of f shared and writable, as a program that keeps a
// file mapped does; unmap undoes it. For the tests of writes through a mapping kept
// across snapshots (a page already dirty faults no more: its writes move no time).
func MapShared(f *os.File, n int) (m []byte, unmap func() error, err error) {
	m, err = unix.Mmap(int(f.Fd()), 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return m, func() error { return unix.Munmap(m) }, nil
}

// Exchange swaps the entries a and b in place (renameat2 RENAME_EXCHANGE), as a
// command may; for the tests of diffs from a change set.
func Exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}
