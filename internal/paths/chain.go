//go:build unix

package paths

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// ErrUnsafe is what every refusal of a path cordon would trust wraps: a directory chain
// or record another user could change, or a socket another user answers on. Its errors
// are in the [errdefs.ErrUnavailable] category (exit status 125).
var ErrUnsafe = errors.New("not safe to trust")

// maxLinks bounds the symbolic links followed while checking one chain (as the kernel's
// own limit for one lookup).
const maxLinks = 40

// MaxRecord is the largest record [ReadRecord] reads: cordon's records (session
// records, owner records, ledger entries) are a few hundred bytes.
const MaxRecord = 1 << 20

// Owner is the uid cordon's own paths must belong to: this process's effective uid.
func Owner() int { return os.Geteuid() }

// CheckDir checks that dir, an absolute path, can be trusted by uid: every component
// from / down is a directory owned by root or uid; none but a sticky one (such as /tmp)
// is writable by group or others; dir itself is owned by uid and writable by no one
// else, and is no symbolic link. A symbolic link on the way is followed only when root
// owns it, and its target is checked the same way. Then nobody but root and uid can
// rename, replace or add anything on the way to dir or in it. A missing component is an
// error that wraps fs.ErrNotExist. No component may be on a proc file system, whose
// links (/proc/PID/root) lead into other mount namespaces whatever they read as.
func CheckDir(dir string, uid int) error { return walkChain(dir, uid, false) }

// MakeDir creates dir (mode 0700) and the missing directories above it, as
// [CheckDir] would accept them: each existing component is checked before anything is
// made below it, so nothing is created in a directory another user controls, and one
// made first by someone else (the race in a sticky /tmp) is refused, never used.
func MakeDir(dir string, uid int) error { return walkChain(dir, uid, true) }

func unsafef(format string, args ...any) error {
	return errdefs.Unavailablef("%w: "+format, append([]any{ErrUnsafe}, args...)...)
}

func walkChain(dir string, uid int, create bool) error {
	if !filepath.IsAbs(dir) {
		return errdefs.Invalidf("%q is not an absolute path", dir)
	}
	want := filepath.Clean(dir)
	rest := strings.Split(strings.TrimPrefix(want, "/"), "/")
	cur := "/"
	for links := 0; len(rest) > 0; {
		if rest[0] == "" {
			rest = rest[1:]
			continue
		}
		if err := checkComponent(cur, uid, false, want); err != nil {
			return err
		}
		next := filepath.Join(cur, rest[0])
		last := len(rest) == 1
		st, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) && create {
			if err = os.Mkdir(next, 0o700); err == nil || errors.Is(err, fs.ErrExist) {
				st, err = os.Lstat(next) // made by us, or by whoever won the race: checked below
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", want, err)
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			if last {
				return unsafef("%s is a symbolic link", want)
			}
			if o := ownerOf(st); o != 0 {
				return unsafef("%s: %s is a symbolic link owned by uid %d, not by root", want, next, o)
			}
			if links++; links > maxLinks {
				return unsafef("%s: too many symbolic links", want)
			}
			target, err := os.Readlink(next)
			if err != nil {
				return fmt.Errorf("%s: %w", want, err)
			}
			if !filepath.IsAbs(target) {
				target = filepath.Join(cur, target)
			}
			target = filepath.Clean(target)
			rest = append(strings.Split(strings.TrimPrefix(target, "/"), "/"), rest[1:]...)
			cur = "/"
			continue
		}
		cur, rest = next, rest[1:]
	}
	return checkComponent(cur, uid, true, want)
}

// checkComponent checks one directory of the chain to want: owned by root or uid, and
// not writable by group or others unless sticky; the last one owned by uid and
// writable by no one else.
func checkComponent(p string, uid int, last bool, want string) error {
	st, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("%s: %w", want, err)
	}
	what := p
	if p != want {
		what = want + ": " + p
	}
	if !st.IsDir() {
		return unsafef("%s is not a directory", what)
	}
	if onProc(p) {
		return unsafef("%s is on a proc file system (its links lead into other processes' namespaces)", what)
	}
	o, perm := ownerOf(st), st.Mode().Perm()
	switch {
	case last && o != uid:
		return unsafef("%s is owned by uid %d, not by uid %d", what, o, uid)
	case o != 0 && o != uid:
		return unsafef("%s is owned by uid %d, neither root nor uid %d", what, o, uid)
	case last && perm&0o022 != 0:
		return unsafef("%s is writable by group or others (mode %04o)", what, perm)
	case perm&0o022 != 0 && st.Mode()&fs.ModeSticky == 0:
		return unsafef("%s is writable by group or others and not sticky (mode %04o)", what, perm)
	}
	return nil
}

func ownerOf(st fs.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

// openRecord opens the record file p as [ReadRecordMax] reads it: without following a
// symbolic link or blocking on a FIFO, refused unless it is a regular file owned by uid
// and writable by no one else.
func openRecord(p string, uid int) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, unsafef("%s is a symbolic link", p)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	switch o := ownerOf(st); {
	case !st.Mode().IsRegular():
		err = unsafef("%s is not a regular file", p)
	case o != uid:
		err = unsafef("%s is owned by uid %d, not by uid %d", p, o, uid)
	case st.Mode().Perm()&0o022 != 0:
		err = unsafef("%s is writable by group or others (mode %04o)", p, st.Mode().Perm())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadRecord reads the record file p (at most [MaxRecord] bytes) that uid must have
// written: it is opened without following a symbolic link or blocking on a FIFO, and
// refused unless it is a regular file owned by uid and writable by no one else. The
// directory holding it is the caller's to have checked ([CheckDir]).
func ReadRecord(p string, uid int) ([]byte, error) { return ReadRecordMax(p, uid, MaxRecord) }

// ReadRecordMax is [ReadRecord] for a record that may be larger (up to max bytes): a
// staged run's record lists every changed path.
func ReadRecordMax(p string, uid int, max int64) ([]byte, error) {
	f, err := openRecord(p, uid)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, unsafef("%s is over %d bytes", p, max)
	}
	return data, nil
}
