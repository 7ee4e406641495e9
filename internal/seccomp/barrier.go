package seccomp

import "golang.org/x/net/bpf"

// Flags and ioctl bits the barrier tests (asm-generic/fcntl.h, asm-generic/ioctl.h;
// the same on amd64 and arm64).
const (
	oWronly  = 0o1
	oRdwr    = 0o2
	oCreat   = 0o100
	oTrunc   = 0o1000
	iocWrite = 0x40000000 // _IOC_WRITE << _IOC_DIRSHIFT: the caller passes data in

	fsIocSetflags   = 0x40086602 // FS_IOC_SETFLAGS (chattr, on a read-only descriptor)
	fsIocFssetxattr = 0x401c5820 // FS_IOC_FSSETXATTR
	// FS_IOC_SET_ENCRYPTION_POLICY sets a directory's encryption policy, on a
	// read-only descriptor; it was numbered _IOR, with no _IOC_WRITE bit.
	fsIocSetEncryptionPolicy = 0x800c6613
)

// heldAlways are the calls that change a file system (a name, a file's content, mode,
// owner, times, size or extended attributes) through a path or a descriptor, whatever
// their arguments: the barrier holds every one. bind makes an inode for an AF_UNIX
// address (its family is in memory, out of the filter's sight, so every bind is held).
// openat2 is refused ENOSYS by [Default] (that verdict wins over the hold); it is held
// all the same, its flags being in memory too.
var heldAlways = []string{
	"creat", "openat2", "mknod", "mknodat", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat",
	"rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
	"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
	"utime", "utimes", "futimesat", "utimensat", "truncate", "ftruncate", "fallocate",
	"setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
	"setxattrat", "removexattrat", "bind",
	// A descriptor passed over a socket (SCM_RIGHTS) may be another process's, open
	// for writing a workspace file: a write through it needs no held call.
	"recvmsg", "recvmmsg",
}

// receiving are the calls of heldAlways that may bring a descriptor in (SCM_RIGHTS).
var receiving = []string{"recvmsg", "recvmmsg"}

// Receiving returns the numbers on arch of the calls the barrier holds that may bring
// a descriptor in from another process (recvmsg, recvmmsg): one opened before the run,
// through whose shared mapping a write makes no event a watch of the file system sees.
func Receiving(arch Arch) []int32 {
	var nrs []int32
	for _, name := range receiving {
		if n, ok := arch.Number(name); ok {
			nrs = append(nrs, int32(n))
		}
	}
	return nrs
}

// fSetlease is fcntl's F_SETLEASE: a write lease on a file makes another's
// non-blocking open of it fail (EWOULDBLOCK), which would make the baseline record
// the file unreadable and the diff show no patch for what the command writes in it.
const fSetlease = 1024

// unheld are the calls [Default] lets through that change no file system by
// themselves: each writes only through a descriptor opened for writing (write,
// pwrite64, copy_file_range, sendfile, splice, io_submit, a shared writable mmap),
// which only a held open can give, or touches no file at all. A call Default allows
// that is in neither list is held (TestBarrierCoversDefault keeps the lists reviewed).
var unheld = []string{
	"accept", "accept4", "access", "alarm", "arch_prctl", "brk", "cachestat", "capget", "capset",
	"chdir", "clock_getres", "clock_gettime", "clock_nanosleep", "clone", "clone3", "close",
	"close_range", "connect", "copy_file_range", "dup", "dup2", "dup3", "epoll_create",
	"epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_pwait", "epoll_pwait2", "epoll_wait",
	"epoll_wait_old", "eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group",
	"faccessat", "faccessat2", "fadvise64", "fanotify_mark", "fchdir", "fdatasync",
	"fgetxattr", "flistxattr", "flock", "fork", "fstat", "fstatfs", "fsync", "futex",
	"futex_requeue", "futex_wait", "futex_waitv", "futex_wake", "get_robust_list",
	"get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "geteuid",
	"getgid", "getgroups", "getitimer", "getpeername", "getpgid", "getpgrp", "getpid", "getppid",
	"getpriority", "getrandom", "getresgid", "getresuid", "getrlimit", "getrusage", "getsid",
	"getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getxattr", "getxattrat",
	"inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel",
	"io_destroy", "io_getevents", "io_pgetevents", "io_setup", "io_submit", "ioprio_get",
	"ioprio_set", "kill", "landlock_add_rule", "landlock_create_ruleset",
	"landlock_restrict_self", "lgetxattr", "listen", "listmount", "listxattr", "listxattrat",
	"llistxattr", "lseek", "lstat", "madvise", "map_shadow_stack", "membarrier", "memfd_create",
	"memfd_secret", "mincore", "mlock", "mlock2", "mlockall", "mmap", "mprotect", "mq_getsetattr",
	"mq_notify", "mq_open", "mq_timedreceive", "mq_timedsend", "mq_unlink", "mremap", "mseal",
	"msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall", "munmap",
	"nanosleep", "newfstatat", "pause", "personality", "pidfd_open", "pidfd_send_signal", "pipe",
	"pipe2", "pkey_alloc", "pkey_free", "pkey_mprotect", "poll", "ppoll", "prctl", "pread64",
	"preadv", "preadv2", "prlimit64", "process_mrelease", "process_vm_readv",
	"process_vm_writev", "pselect6", "ptrace", "pwrite64", "pwritev", "pwritev2", "read",
	"readahead", "readlink", "readlinkat", "readv", "recvfrom",
	"remap_file_pages", "restart_syscall", "rseq", "rt_sigaction", "rt_sigpending",
	"rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend", "rt_sigtimedwait",
	"rt_tgsigqueueinfo", "sched_get_priority_max", "sched_get_priority_min",
	"sched_getaffinity", "sched_getattr", "sched_getparam", "sched_getscheduler",
	"sched_rr_get_interval", "sched_setaffinity", "sched_setattr", "sched_setparam",
	"sched_setscheduler", "sched_yield", "seccomp", "select", "semctl", "semget", "semop",
	"semtimedop", "sendfile", "sendmmsg", "sendmsg", "sendto", "set_robust_list",
	"set_thread_area", "set_tid_address", "setfsgid", "setfsuid", "setgid", "setgroups",
	"setitimer", "setpgid", "setpriority", "setregid", "setresgid", "setresuid", "setreuid",
	"setrlimit", "setsid", "setsockopt", "setuid", "shmat", "shmctl", "shmdt", "shmget",
	"shutdown", "sigaltstack", "signalfd", "signalfd4", "socket", "socketpair", "splice", "stat",
	"statfs", "statmount", "statx", "sync", "sync_file_range", "syncfs", "sysinfo", "tee",
	"tgkill", "time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
	"timer_settime", "timerfd_create", "timerfd_gettime", "timerfd_settime", "times", "tkill",
	"umask", "uname", "uretprobe", "vfork", "vmsplice", "wait4", "waitid", "write", "writev",
}

// Barrier is the policy of the barrier filter, which process 1 loads beside [Default]
// on the thread that forks a one-command run's command: it holds ([Notify]) the
// command's every call that may change a file system, until cordon, outside the
// sandbox, answers the filter's listener. cordon lets them continue once the
// workspace's baseline is read, so the command starts while the baseline is taken, and
// changes nothing before it is.
//
// Held are the calls of heldAlways (with recvmsg and recvmmsg, which may bring in a
// descriptor open for writing); fcntl F_SETLEASE; open and openat when their flags ask for writing,
// creating or truncating (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC; O_TMPFILE needs one of the
// first two); and ioctl with a request that passes data in (_IOC_WRITE: among them
// FS_IOC_SETFLAGS and FS_IOC_FSSETXATTR, which change a file through a read-only
// descriptor) or that is FS_IOC_SET_ENCRYPTION_POLICY (numbered as if it read). The
// terminal and socket requests, numbered before _IOC_* with no direction bits, go
// through.
//
// A notifying filter of the command's own would take the barrier's notifications (the
// newest filter wins a tie of verdicts), but the kernel refuses a second listener in a
// filter chain (EBUSY); and answering one takes ioctls that pass data in
// (SECCOMP_IOCTL_NOTIF_RECV and _SEND), which are held until the barrier is released.
//
// The calls Default allows and unheld names go through; any other call Default allows
// is held, so that a call added to Default is held until it is reviewed. Calls Default
// refuses are refused here too (the zero Rule): the kernel takes the strictest verdict
// of the two filters, and Default's refusal stands either way.
func Barrier() Policy {
	rules := make(map[string]Rule, len(heldAlways)+len(unheld)+3)
	for name, r := range Default().Rules {
		if r.Action != Deny {
			rules[name] = Rule{Action: Notify}
		}
	}
	for _, name := range unheld {
		rules[name] = Rule{Action: Allow}
	}
	for _, name := range heldAlways {
		rules[name] = Rule{Action: Notify}
	}
	writing := []Cond{{Op: AnyBit, Values: []uint32{oWronly, oRdwr, oCreat, oTrunc}}}
	for name, arg := range map[string]int{"open": 1, "openat": 2} {
		c := writing[0]
		c.Arg = arg
		rules[name] = Rule{Action: Allow, DenyIf: []Cond{c}, OnMatch: Notify}
	}
	rules["fcntl"] = Rule{Action: Allow, OnMatch: Notify, DenyIf: []Cond{{Arg: 1, Op: In, Values: []uint32{fSetlease}}}}
	rules["ioctl"] = Rule{Action: Allow, OnMatch: Notify, DenyIf: []Cond{
		{Arg: 1, Op: AnyBit, Values: []uint32{iocWrite}},
		{Arg: 1, Op: In, Values: []uint32{fsIocSetflags, fsIocFssetxattr, fsIocSetEncryptionPolicy}},
	}}
	return Policy{Rules: rules}
}

// BarrierProgram returns [Barrier] compiled for arch.
func BarrierProgram(arch Arch) ([]bpf.RawInstruction, error) {
	return Barrier().Compile(arch)
}
