package seccomp

import (
	"slices"
	"testing"
)

const (
	eperm  = retErrno | errnoEPERM
	enosys = retErrno | errnoENOSYS
	allow  = retAllow
	kill   = retKillProcess

	// Thread and fork flags as glibc and Go pass them to clone.
	cloneThread = 0x003d0f00 // VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
	cloneFork   = 0x01200011 // CHILD_SETTID|CHILD_CLEARTID|SIGCHLD
	cloneVfork  = 0x00004111 // VFORK|VM|SIGCHLD
	afPacket    = 17
	afKey       = 15
	afTIPC      = 30
	afAlg       = 38
	afMCTP      = 45
	tcgets      = 0x5401
	addrNoRand  = 0x0040000
	highWord    = 0xdead_beef_0000_0000
)

// deniedByName are calls the default policy denies outright; TestDecisions checks each
// on every arch that has it.
var deniedByName = []string{
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "open_tree_attr",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "unshare", "setns",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "lookup_dcookie",
	"name_to_handle_at", "open_by_handle_at", "iopl", "ioperm", "syslog", "settimeofday",
	"clock_settime", "clock_adjtime", "adjtimex", "uselib", "ustat", "sysfs", "_sysctl",
	"vhangup", "nfsservctl", "pidfd_getfd", "io_uring_setup", "io_uring_enter",
	"io_uring_register", "fanotify_init", "lsm_set_self_attr", "lsm_get_self_attr",
	"process_madvise", "kcmp", "modify_ldt", "sethostname", "setdomainname", "mbind",
	"set_mempolicy", "migrate_pages", "move_pages", "listns", "afs_syscall",
}

// allowedByName are calls that must keep working, with zero arguments.
var allowedByName = []string{
	"read", "write", "openat", "close", "futex", "mmap", "execve", "wait4", "ptrace",
	"process_vm_readv", "process_vm_writev", "landlock_create_ruleset",
	"landlock_restrict_self", "seccomp", "prctl", "rt_sigreturn", "exit_group",
	"pidfd_open", "memfd_create", "getrandom", "rseq", "arch_prctl", "uretprobe",
}

// decision is one call and the filter's verdict on it.
type decision struct {
	name string
	sys  string // looked up in the arch's table; "" uses nr
	nr   uint32
	arch uint32 // 0 means the filter's own
	args [6]uint64
	want uint32
}

// decisions are the argument tests and ABI checks, on every arch.
var decisions = []decision{
	{name: "clone3 allowed (commands are cloned into their cgroups)", sys: "clone3", want: allow},
	{name: "clone thread", sys: "clone", args: [6]uint64{cloneThread}, want: allow},
	{name: "clone fork", sys: "clone", args: [6]uint64{cloneFork}, want: allow},
	{name: "clone vfork", sys: "clone", args: [6]uint64{cloneVfork}, want: allow},
	{name: "clone high word ignored", sys: "clone", args: [6]uint64{highWord | cloneThread}, want: allow},
	{name: "clone newuser", sys: "clone", args: [6]uint64{cloneNewUser | 0x11}, want: eperm},
	{name: "clone newns", sys: "clone", args: [6]uint64{cloneNewNS | 0x11}, want: eperm},
	{name: "clone newuts", sys: "clone", args: [6]uint64{cloneNewUTS}, want: eperm},
	{name: "clone newipc", sys: "clone", args: [6]uint64{cloneNewIPC}, want: eperm},
	{name: "clone newpid", sys: "clone", args: [6]uint64{cloneNewPID}, want: eperm},
	{name: "clone newnet", sys: "clone", args: [6]uint64{cloneNewNet}, want: eperm},
	{name: "clone newcgroup", sys: "clone", args: [6]uint64{cloneNewCgroup}, want: eperm},
	{name: "clone newtime bit", sys: "clone", args: [6]uint64{cloneNewTime}, want: eperm},
	{name: "clone newuser in second arg only", sys: "clone", args: [6]uint64{0x11, cloneNewUser}, want: allow},
	{name: "socket vsock", sys: "socket", args: [6]uint64{afVsock, 1}, want: eperm},
	{name: "socket vsock high word", sys: "socket", args: [6]uint64{highWord | afVsock}, want: eperm},
	{name: "socket inet", sys: "socket", args: [6]uint64{afInet, 1}, want: allow},
	{name: "socket inet high word", sys: "socket", args: [6]uint64{highWord | afInet, 1}, want: allow},
	{name: "socket inet6", sys: "socket", args: [6]uint64{afInet6, 2}, want: allow},
	{name: "socket unix", sys: "socket", args: [6]uint64{afUnix, 1}, want: allow},
	{name: "socket netlink", sys: "socket", args: [6]uint64{afNetlink, 3}, want: allow},
	{name: "socket packet", sys: "socket", args: [6]uint64{afPacket, 3}, want: eperm},
	{name: "socket key", sys: "socket", args: [6]uint64{afKey, 3}, want: eperm},
	{name: "socket tipc", sys: "socket", args: [6]uint64{afTIPC}, want: eperm},
	{name: "socket alg", sys: "socket", args: [6]uint64{afAlg}, want: eperm},
	{name: "socket mctp", sys: "socket", args: [6]uint64{afMCTP}, want: eperm},
	{name: "socketpair vsock", sys: "socketpair", args: [6]uint64{afVsock}, want: eperm},
	{name: "socketpair unix", sys: "socketpair", args: [6]uint64{afUnix, 1}, want: allow},
	{name: "ioctl tiocsti", sys: "ioctl", args: [6]uint64{0, tiocsti}, want: eperm},
	{name: "ioctl tiocsti high word", sys: "ioctl", args: [6]uint64{0, highWord | tiocsti}, want: eperm},
	{name: "ioctl tioclinux", sys: "ioctl", args: [6]uint64{0, tioclinux}, want: eperm},
	{name: "ioctl tiocsetd", sys: "ioctl", args: [6]uint64{0, tiocsetd}, want: eperm},
	{name: "ioctl tcgets", sys: "ioctl", args: [6]uint64{0, tcgets}, want: allow},
	{name: "ioctl tiocsti as fd", sys: "ioctl", args: [6]uint64{tiocsti, tcgets}, want: allow},
	{name: "personality linux", sys: "personality", args: [6]uint64{perLinux}, want: allow},
	{name: "personality query", sys: "personality", args: [6]uint64{perQuery}, want: allow},
	{name: "personality linux32", sys: "personality", args: [6]uint64{perLinux32}, want: allow},
	{name: "personality uname26", sys: "personality", args: [6]uint64{uname26}, want: allow},
	{name: "personality no aslr", sys: "personality", args: [6]uint64{addrNoRand}, want: eperm},
	{name: "wrong arch", sys: "read", arch: 0x40000003, want: kill}, // AUDIT_ARCH_I386
	{name: "other arch's number", sys: "read", arch: 0xc00000f3, want: kill},
	{name: "above the table", nr: 472, want: enosys},
	{name: "far above the table", nr: 0x3fffffff, want: enosys},
	{name: "nr -1", nr: 0xffffffff, want: enosys},
}

func TestDecisions(t *testing.T) {
	tests := slices.Clone(decisions)
	for _, s := range deniedByName {
		tests = append(tests, decision{name: s + " denied", sys: s, want: eperm})
	}
	for _, s := range allowedByName {
		tests = append(tests, decision{name: s + " allowed", sys: s, want: allow})
	}
	for _, arch := range arches(t) {
		f := newFilter(t, arch)
		cases := tests
		if arch.x32 {
			read, _ := arch.Number("read")
			cases = append(cases,
				decision{name: "x32 read", nr: x32Bit | read, want: kill},
				decision{name: "x32 unassigned", nr: x32Bit | 600, want: kill},
				decision{name: "amd64 gap", nr: 400, want: enosys})
		} else {
			cases = append(cases, decision{name: "bit 30 off amd64", nr: x32Bit, want: enosys})
		}
		for _, tt := range cases {
			c := call{nr: tt.nr, arch: tt.arch, args: tt.args}
			if tt.sys != "" {
				nr, ok := arch.Number(tt.sys)
				if !ok {
					continue // the architecture has no such call (open on arm64): nothing to decide
				}
				c.nr = nr
			}
			t.Run(arch.String()+"/"+tt.name, func(t *testing.T) {
				if c.arch == 0 {
					c.arch = arch.audit
				}
				got, _ := f.run(t, c)
				if got != tt.want {
					t.Errorf("got %s; want %s", retName(got), retName(tt.want))
				}
			})
		}
	}
}
