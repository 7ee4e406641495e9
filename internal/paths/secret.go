package paths

import (
	"io"
	"os"
	"syscall"
)

// ReadSecret reads the secret file p (a token; at most max bytes), which only uid may
// read: the file opened (a symbolic link is followed; a FIFO does not block) must be a
// regular file owned by uid that neither group nor others may read or write (as ssh
// refuses a private key others can read). A refusal is [ErrUnsafe] and says why.
func ReadSecret(p string, uid int, max int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch o := ownerOf(st); {
	case !st.Mode().IsRegular():
		return nil, unsafef("%s is not a regular file", p)
	case o != uid:
		return nil, unsafef("%s is owned by uid %d, not by uid %d", p, o, uid)
	case st.Mode().Perm()&0o077 != 0:
		return nil, unsafef("%s may be read or written by group or others (mode %04o; chmod 600 it)", p, st.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, unsafef("%s is over %d bytes", p, max)
	}
	return data, nil
}
