package seccomp

// Flags and constants the default policy tests (linux/sched.h, linux/socket.h,
// asm-generic/ioctls.h, linux/personality.h).
const (
	cloneNewTime   = 0x00000080 // only clone3 and unshare take it: on clone it is a bit of the exit signal
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000

	afUnix    = 1
	afInet    = 2
	afInet6   = 10
	afNetlink = 16
	afVsock   = 40

	tiocsti   = 0x5412 // push a byte into a terminal's input queue
	tiocsetd  = 0x5423 // set a terminal's line discipline
	tioclinux = 0x541c // console selection paste, among others

	sISUID = 0o4000
	sISGID = 0o2000

	perLinux     = 0x0000000
	perLinux32   = 0x0000008
	uname26      = 0x0020000
	perQuery     = 0xffffffff
	perLinux32U2 = perLinux32 | uname26
)

// Default is the policy for a sandbox's commands: Docker's default seccomp profile
// for a process with no capabilities (moby/profiles seccomp v0.3.0, default.json),
// made stricter. TestAtLeastAsStrictAsDocker holds it to that.
//
// Docker denies, and so does Default, every call it grants only to a capability:
// namespaces (unshare, setns; clone with CLONE_NEW*), mounts (mount, umount2,
// pivot_root, chroot, the new mount API: open_tree, move_mount, fsopen, fsconfig,
// fsmount, fspick, mount_setattr), keyrings (add_key, request_key, keyctl), bpf,
// perf_event_open, userfaultfd, io_uring_*, modules, kexec, reboot, swap, acct,
// quotactl(_fd), lookup_dcookie, open_by_handle_at, iopl, ioperm, syslog, setting the
// clock (settimeofday, clock_settime), vhangup, NUMA placement (mbind,
// set_mempolicy, get_mempolicy, migrate_pages, move_pages), fanotify_init,
// lsm_*_self_attr, lsm_list_modules, and the ptrace family's cross-process extras
// (kcmp, pidfd_getfd, process_madvise); and every call its list predates or omits
// (uselib, ustat, sysfs, _sysctl, nfsservctl, uprobe, the unimplemented amd64 slots,
// open_tree_attr, file_getattr, file_setattr, listns, rseq_slice_yield).
//
// Default also denies what Docker allows but a coding agent never needs:
//   - adjtimex, clock_adjtime: read-only they only query NTP state, and their
//     write modes need CAP_SYS_TIME; nothing an agent runs tunes the clock.
//   - name_to_handle_at: only useful with open_by_handle_at (denied); it leaks file
//     handles, the raw material of container escapes such as "shocker".
//   - modify_ldt (amd64): 16-bit segments for DOSEMU and old Wine, with a history of
//     kernel bugs; many distributions compile it out.
//   - socket and socketpair outside AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK:
//     Docker allows some 30 families. AF_VSOCK reaches the hypervisor's host whatever
//     the network namespace; AF_PACKET, AF_KEY, AF_TIPC, AF_RDS, AF_BLUETOOTH,
//     AF_NFC, AF_IB, AF_MCTP, AF_ALG and the rest are seldom-used protocol code,
//     where most remote and local kernel bugs live.
//   - ioctl TIOCSTI and TIOCLINUX, which inject input into a terminal (the user's, if
//     the command still holds it), and TIOCSETD, whose line disciplines (n_gsm,
//     n_hdlc) have been the entry point of several local privilege escalations.
//
// Unlike Docker, clone3 is allowed: process 1 forks each command from a thread that
// carries this filter, straight into the command's cgroup, which only clone3 can do.
// Its flags are in memory, out of the filter's sight; the one namespace it could make
// without a capability, a user namespace, is refused underneath (bwrap's
// --disable-userns; the container engines' own profiles answer clone3 ENOSYS, and
// containerd's spec is made to). As in Docker, clone is denied any CLONE_NEW*
// flag (and CLONE_NEWTIME's bit 0x80, which on clone would be an exit signal above
// 127 and never is a real one); personality may only set Linux, PER_LINUX32 and
// UNAME26, or query. ptrace, process_vm_readv and process_vm_writev stay: debuggers
// and strace on the command's own children must work, while Landlock (a sandboxed
// process may trace only its own domain and below) and dumpability keep them off
// other processes. seccomp (nested filters), prctl and landlock_* stay too.
func Default() Policy {
	rules := make(map[string]Rule, len(allowed)+8)
	for _, name := range allowed {
		rules[name] = Rule{Action: Allow}
	}
	families := []uint32{afUnix, afInet, afInet6, afNetlink}
	rules["clone3"] = Rule{Action: Allow}
	rules["clone"] = Rule{Action: Allow, DenyIf: []Cond{{Arg: 0, Op: AnyBit, Values: []uint32{
		cloneNewNS, cloneNewUTS, cloneNewIPC, cloneNewUser, cloneNewPID, cloneNewNet, cloneNewCgroup, cloneNewTime,
	}}}}
	rules["socket"] = Rule{Action: Allow, DenyIf: []Cond{{Arg: 0, Op: NotIn, Values: families}}}
	rules["socketpair"] = Rule{Action: Allow, DenyIf: []Cond{{Arg: 0, Op: NotIn, Values: families}}}
	rules["ioctl"] = Rule{Action: Allow, DenyIf: []Cond{{Arg: 1, Op: In, Values: []uint32{tiocsti, tioclinux, tiocsetd}}}}
	rules["personality"] = Rule{Action: Allow, DenyIf: []Cond{{Arg: 0, Op: NotIn, Values: []uint32{
		perLinux, perLinux32, uname26, perLinux32U2, perQuery,
	}}}}
	// No set-user-ID or set-group-ID bit, on any file: a bwrap sandbox started by root
	// writes its workspace through an idmapped mount, where a file it owns is root's on
	// the host, and a setuid-root program planted there would run as root the next
	// time anyone on the host starts it. The mode is an argument of every call that
	// sets it (openat2 passes it in memory, and answers ENOSYS so that libc uses
	// openat).
	setid := []uint32{sISUID, sISGID}
	for name, arg := range map[string]int{
		"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2, "creat": 1, "open": 2, "openat": 3,
		"mknod": 1, "mknodat": 2, "mkdir": 1, "mkdirat": 2,
	} {
		rules[name] = Rule{Action: Allow, DenyIf: []Cond{{Arg: arg, Op: AnyBit, Values: setid}}}
	}
	rules["openat2"] = Rule{Action: NoSys}
	return Policy{Rules: rules}
}

// allowed are the calls Default lets through unconditionally: Docker's unconditional
// list for amd64 and arm64 (its arch-specific arch_prctl included, and the ptrace
// family it allows from kernel 4.8), minus adjtimex, clock_adjtime,
// name_to_handle_at and modify_ldt. Keep it sorted.
var allowed = []string{
	"accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "cachestat", "capget",
	"capset", "chdir", "chmod", "chown", "clock_getres", "clock_gettime", "clock_nanosleep",
	"close", "close_range", "connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
	"epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2",
	"epoll_wait", "epoll_wait_old", "eventfd", "eventfd2", "execve", "execveat", "exit",
	"exit_group", "faccessat", "faccessat2", "fadvise64", "fallocate", "fanotify_mark", "fchdir",
	"fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat", "fcntl", "fdatasync", "fgetxattr",
	"flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat", "fstatfs", "fsync",
	"ftruncate", "futex", "futex_requeue", "futex_wait", "futex_waitv", "futex_wake", "futimesat",
	"get_robust_list", "get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid",
	"geteuid", "getgid", "getgroups", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid",
	"getppid", "getpriority", "getrandom", "getresgid", "getresuid", "getrlimit", "getrusage",
	"getsid", "getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getxattr",
	"getxattrat", "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch",
	"io_cancel", "io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit", "ioctl",
	"ioprio_get", "ioprio_set", "kill", "landlock_add_rule", "landlock_create_ruleset",
	"landlock_restrict_self", "lchown", "lgetxattr", "link", "linkat", "listen", "listmount",
	"listxattr", "listxattrat", "llistxattr", "lremovexattr", "lseek", "lsetxattr", "lstat",
	"madvise", "map_shadow_stack", "membarrier", "memfd_create", "memfd_secret", "mincore",
	"mkdir", "mkdirat", "mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap", "mprotect",
	"mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink",
	"mremap", "mseal", "msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall",
	"munmap", "nanosleep", "newfstatat", "open", "openat", "openat2", "pause", "pidfd_open",
	"pidfd_send_signal", "pipe", "pipe2", "pkey_alloc", "pkey_free", "pkey_mprotect", "poll",
	"ppoll", "prctl", "pread64", "preadv", "preadv2", "prlimit64", "process_mrelease",
	"process_vm_readv", "process_vm_writev", "pselect6", "ptrace", "pwrite64", "pwritev",
	"pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "recvfrom", "recvmmsg",
	"recvmsg", "remap_file_pages", "removexattr", "removexattrat", "rename", "renameat",
	"renameat2", "restart_syscall", "rmdir", "rseq", "rt_sigaction", "rt_sigpending",
	"rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"rt_tgsigqueueinfo", "sched_get_priority_max", "sched_get_priority_min", "sched_getaffinity",
	"sched_getattr", "sched_getparam", "sched_getscheduler", "sched_rr_get_interval",
	"sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler", "sched_yield",
	"seccomp", "select", "semctl", "semget", "semop", "semtimedop", "sendfile", "sendmmsg",
	"sendmsg", "sendto", "set_robust_list", "set_thread_area", "set_tid_address", "setfsgid",
	"setfsuid", "setgid", "setgroups", "setitimer", "setpgid", "setpriority", "setregid",
	"setresgid", "setresuid", "setreuid", "setrlimit", "setsid", "setsockopt", "setuid",
	"setxattr", "setxattrat", "shmat", "shmctl", "shmdt", "shmget", "shutdown", "sigaltstack",
	"signalfd", "signalfd4", "socketpair", "splice", "stat", "statfs", "statmount", "statx",
	"symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill",
	"time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime", "timer_settime",
	"timerfd_create", "timerfd_gettime", "timerfd_settime", "times", "tkill", "truncate", "umask",
	"uname", "unlink", "unlinkat", "uretprobe", "utime", "utimensat", "utimes", "vfork",
	"vmsplice", "wait4", "waitid", "write", "writev",
}
