package linux

import "golang.org/x/sys/unix"

// statAt stats name in the directory dfd, following no symbolic link at name. Every
// file system macOS writes keeps a birth time.
func statAt(dfd int, name string) (entry, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return entry{}, err
	}
	e := entry{mode: uint32(st.Mode), size: st.Size, id: FileID{Dev: uint64(uint32(st.Dev)), Ino: st.Ino}}
	e.id.Birth = st.Btim.Sec*1e9 + st.Btim.Nsec
	return e, nil
}
