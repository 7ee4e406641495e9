package linux

import "golang.org/x/sys/unix"

// statAt stats name in the directory dfd, following no symbolic link at name.
func statAt(dfd int, name string) (entry, error) {
	return statx(dfd, name, unix.AT_SYMLINK_NOFOLLOW)
}

// statFd stats the file open as fd: the entry it names whatever is at its path now.
func statFd(fd int) (entry, error) {
	return statx(fd, "", unix.AT_EMPTY_PATH)
}

func statx(dfd int, name string, flags int) (entry, error) {
	var stx unix.Statx_t
	mask := unix.STATX_TYPE | unix.STATX_INO | unix.STATX_SIZE | unix.STATX_UID | unix.STATX_CTIME | unix.STATX_BTIME
	if err := unix.Statx(dfd, name, flags|unix.AT_STATX_SYNC_AS_STAT, mask, &stx); err != nil {
		return entry{}, err
	}
	e := entry{mode: uint32(stx.Mode), size: int64(stx.Size), uid: stx.Uid, id: FileID{Dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), Ino: stx.Ino}}
	switch {
	case stx.Mask&unix.STATX_BTIME != 0:
		e.id.Birth = stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
	case e.mode&unix.S_IFMT != unix.S_IFDIR:
		e.id.Change = stx.Ctime.Sec*1e9 + int64(stx.Ctime.Nsec)
	}
	return e, nil
}
