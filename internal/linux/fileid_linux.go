package linux

import "golang.org/x/sys/unix"

// statAt stats name in the directory dfd, following no symbolic link at name.
func statAt(dfd int, name string) (entry, error) {
	var stx unix.Statx_t
	mask := unix.STATX_TYPE | unix.STATX_INO | unix.STATX_SIZE | unix.STATX_CTIME | unix.STATX_BTIME
	if err := unix.Statx(dfd, name, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_SYNC_AS_STAT, mask, &stx); err != nil {
		return entry{}, err
	}
	e := entry{mode: uint32(stx.Mode), size: int64(stx.Size), id: FileID{Dev: unix.Mkdev(stx.Dev_major, stx.Dev_minor), Ino: stx.Ino}}
	switch {
	case stx.Mask&unix.STATX_BTIME != 0:
		e.id.Birth = stx.Btime.Sec*1e9 + int64(stx.Btime.Nsec)
	case e.mode&unix.S_IFMT != unix.S_IFDIR:
		e.id.Change = stx.Ctime.Sec*1e9 + int64(stx.Ctime.Nsec)
	}
	return e, nil
}
