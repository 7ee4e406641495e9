package linux

import "golang.org/x/sys/unix"

// statAt stats name in the directory dfd, following no symbolic link at name. Every
// file system macOS writes keeps a birth time.
func statAt(dfd int, name string) (entry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return entry{}, err
	}
	return entryOf(&st), nil
}

// statFd stats the file open as fd: the entry it names whatever is at its path now.
func statFd(fd int) (entry, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return entry{}, err
	}
	return entryOf(&st), nil
}

func entryOf(st *unix.Stat_t) entry {
	e := entry{mode: uint32(st.Mode), size: st.Size, uid: st.Uid, id: FileID{Dev: uint64(uint32(st.Dev)), Ino: st.Ino}}
	e.id.Birth = st.Btim.Sec*1e9 + st.Btim.Nsec
	return e
}
