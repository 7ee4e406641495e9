// Package safefs is cordon's one way to open a file that a sandbox could have
// written or raced: a regular file beneath a directory, found without following a
// symbolic link, opened without blocking (a FIFO planted in its place cannot hang
// cordon), refused unless it is a regular file, and bounded in size where the caller
// reads it whole.
//
// # Which way won
//
// Three ways were in use: an [os.Root], a plain open with O_NOFOLLOW, and openat2
// walks in internal/linux. On Linux a [Dir] is an internal/linux Tree: every path is
// resolved by one openat2 call with RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS,
// RESOLVE_NO_MAGICLINKS and RESOLVE_NO_XDEV, and the last component is opened with
// O_NOFOLLOW. That is the strongest of the three and the only one that checks every
// component atomically: O_NOFOLLOW checks only the last one, so a link swapped in
// for a middle directory redirects the open; an os.Root keeps the open inside its
// directory but follows links that stay inside (so a sandbox can point HEAD at
// another of its files, or a directory at another) and crosses mount points. A Dir
// refuses all of these: a link anywhere on the way fails the call (ELOOP), a mount
// crossed fails it (EXDEV), it never redirects it.
//
// Other systems (macOS, where seatbelt builds) have no openat2. There a Dir is an
// os.Root, the last component is checked to be a regular file before the open and to
// be the same file after it (O_NOFOLLOW as well), so a link at the last component is
// refused and one on the way cannot lead out of the directory; a link that stays
// inside it is followed, as before this package.
//
// The directory a Dir starts from is trusted as named ([OpenDir]'s base, cordon's
// own path to a workspace, say); what lies beneath it is not.
package safefs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Errors returned by a Dir, wrapped in an [fs.PathError].
var (
	// ErrNotRegular: the path names something other than a regular file (a
	// directory, a FIFO, a device, a socket, a link).
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file holds more bytes than the caller's limit.
	ErrTooLarge = errors.New("over the size limit")
)

// NoLimit, as the limit of [Dir.Open], opens a file of any size (the caller
// streams it, bounded its own way).
const NoLimit = -1

// Open opens the regular file rel beneath d for reading. It refuses a path with a
// link on the way or at its end, anything but a regular file (ErrNotRegular) and,
// when max >= 0, a file of more than max bytes (ErrTooLarge). The file may still
// grow after the check: a caller that reads it whole reads at most max+1 bytes
// ([Dir.ReadFile] does).
func (d *Dir) Open(rel string, max int64) (*os.File, error) {
	f, err := d.open(rel)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("%w (%s)", ErrNotRegular, fi.Mode().Type())}
	case max >= 0 && fi.Size() > max:
		err = &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, fi.Size(), max)}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile reads the regular file rel beneath d, opened as [Dir.Open] opens it, if
// it holds at most max bytes (max must not be negative), when opened and when read.
func (d *Dir) ReadFile(rel string, max int64) ([]byte, error) {
	if max < 0 {
		return nil, fmt.Errorf("reading %s: no size limit given", rel)
	}
	f, err := d.Open(rel, max)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: fmt.Errorf("%w: grew past %d bytes", ErrTooLarge, max)}
	}
	return data, nil
}
