package linux

import "golang.org/x/sys/unix"

// FilesystemType is the type of the file system path is on (statfs f_type, a magic
// number such as TMPFS_MAGIC). f_type's Go type differs by architecture; the magic
// numbers are 32 bits.
func FilesystemType(path string) (uint32, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return uint32(st.Type), nil
}

// MountTracefs mounts tracefs, the kernel's tracing file system, at target.
func MountTracefs(target string) error {
	return unix.Mount("tracefs", target, "tracefs", 0, "")
}
