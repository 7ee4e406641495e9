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

// BPFFSMagic is bpffs's file system type (statfs f_type).
const BPFFSMagic = uint32(unix.BPF_FS_MAGIC)

// MountBPFFS mounts a bpffs, the file system BPF objects are pinned in, at target,
// readable by root only.
func MountBPFFS(target string) error {
	return unix.Mount("bpf", target, "bpf", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700")
}

// kernelFilesystems are the kernel's own file systems (statfs f_type), by name: their
// files are interfaces to the kernel, not data, so none may be a sandbox's workspace
// or writable grant. configfs (0x62656570) and fusectl (0x65735543) have no constant
// in x/sys.
var kernelFilesystems = map[uint32]string{
	uint32(unix.PROC_SUPER_MAGIC): "proc", uint32(unix.SYSFS_MAGIC): "sysfs",
	uint32(unix.CGROUP_SUPER_MAGIC): "cgroup", uint32(unix.CGROUP2_SUPER_MAGIC): "cgroup2",
	uint32(unix.DEBUGFS_MAGIC): "debugfs", uint32(unix.TRACEFS_MAGIC): "tracefs",
	uint32(unix.SECURITYFS_MAGIC): "securityfs", uint32(unix.BINFMTFS_MAGIC): "binfmt_misc",
	uint32(unix.BPF_FS_MAGIC): "bpf", uint32(unix.EFIVARFS_MAGIC): "efivarfs",
	uint32(unix.PSTOREFS_MAGIC): "pstore", uint32(unix.SELINUX_MAGIC): "selinuxfs",
	uint32(unix.SMACK_MAGIC): "smackfs", uint32(unix.NSFS_MAGIC): "nsfs",
	uint32(unix.DEVPTS_SUPER_MAGIC): "devpts", uint32(unix.AUTOFS_SUPER_MAGIC): "autofs",
	0x62656570: "configfs", 0x65735543: "fusectl",
}

// KernelFilesystem names the kernel file system path is on, or "" when it is on an
// ordinary one.
func KernelFilesystem(path string) (string, error) {
	t, err := FilesystemType(path)
	if err != nil {
		return "", err
	}
	return kernelFilesystems[t], nil
}
