package linux

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

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

// BPFFSMagic is bpffs's file system type (statfs f_type).
const BPFFSMagic = uint32(unix.BPF_FS_MAGIC)

// MountBPFFS mounts a bpffs, the file system BPF objects are pinned in, at target,
// readable by root only.
func MountBPFFS(target string) error {
	return unix.Mount("bpf", target, "bpf", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700")
}

// TryLock takes an exclusive flock(2) on f without waiting: false when another open
// file holds it. Closing f releases it.
func TryLock(f *os.File) (bool, error) {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return false, nil
	}
	return false, err
}
