package seccomp

import (
	"slices"
	"testing"

	"golang.org/x/net/bpf"
)

const (
	notify = retUserNotif

	oRdonly    = 0
	oDirectory = 0o200000 // amd64's; arm64's differs, and neither bit matters here
	oCloexec   = 0o2000000
	oNoatime   = 0o1000000
	oPath      = 0o10000000
	oTmpfile   = 0o20000000 | oDirectory
	atFDCWD    = 0xffffff9c // AT_FDCWD's low word
	tiocgwinsz = 0x5413
	fionread   = 0x541b
	ficlone    = 0x40049409
	fsIocGetfl = 0x80086601 // FS_IOC_GETFLAGS: _IOR
)

// barrierDecisions are the barrier's verdicts on calls with arguments, on every arch
// that has the call.
var barrierDecisions = []decision{
	{name: "openat read-only", sys: "openat", args: [6]uint64{atFDCWD, 0, oRdonly | oCloexec}, want: allow},
	{name: "openat directory", sys: "openat", args: [6]uint64{atFDCWD, 0, oDirectory | oCloexec}, want: allow},
	{name: "openat O_PATH", sys: "openat", args: [6]uint64{atFDCWD, 0, oPath}, want: allow},
	{name: "openat noatime", sys: "openat", args: [6]uint64{atFDCWD, 0, oNoatime}, want: allow},
	{name: "openat write-only", sys: "openat", args: [6]uint64{atFDCWD, 0, oWronly}, want: notify},
	{name: "openat read-write", sys: "openat", args: [6]uint64{atFDCWD, 0, oRdwr | oCloexec}, want: notify},
	{name: "openat create", sys: "openat", args: [6]uint64{atFDCWD, 0, oCreat}, want: notify},
	{name: "openat truncate, read-only", sys: "openat", args: [6]uint64{atFDCWD, 0, oTrunc}, want: notify},
	{name: "openat tmpfile", sys: "openat", args: [6]uint64{atFDCWD, 0, oTmpfile | oWronly}, want: notify},
	{name: "openat write, high word", sys: "openat", args: [6]uint64{atFDCWD, 0, highWord | oWronly}, want: notify},
	{name: "openat flags as fd", sys: "openat", args: [6]uint64{oWronly, 0, oRdonly}, want: allow},
	{name: "openat flags as mode", sys: "openat", args: [6]uint64{atFDCWD, 0, oRdonly, 0o666}, want: allow},
	{name: "open read-only", sys: "open", args: [6]uint64{0, oRdonly}, want: allow},
	{name: "open write-only", sys: "open", args: [6]uint64{0, oWronly}, want: notify},
	{name: "open create", sys: "open", args: [6]uint64{0, oCreat | oWronly | oTrunc}, want: notify},
	{name: "open flags as mode", sys: "open", args: [6]uint64{0, oRdonly, oWronly}, want: allow},
	{name: "fcntl F_SETLEASE", sys: "fcntl", args: [6]uint64{3, fSetlease, 1}, want: notify},
	{name: "fcntl F_GETFL", sys: "fcntl", args: [6]uint64{3, 3}, want: allow},
	{name: "fcntl F_SETFD", sys: "fcntl", args: [6]uint64{3, 2, 1}, want: allow},
	{name: "ioctl tcgets", sys: "ioctl", args: [6]uint64{1, tcgets}, want: allow},
	{name: "ioctl tiocgwinsz", sys: "ioctl", args: [6]uint64{1, tiocgwinsz}, want: allow},
	{name: "ioctl fionread", sys: "ioctl", args: [6]uint64{3, fionread}, want: allow},
	{name: "ioctl FS_IOC_GETFLAGS", sys: "ioctl", args: [6]uint64{3, fsIocGetfl}, want: allow},
	{name: "ioctl FS_IOC_SETFLAGS", sys: "ioctl", args: [6]uint64{3, fsIocSetflags}, want: notify},
	{name: "ioctl FS_IOC_FSSETXATTR", sys: "ioctl", args: [6]uint64{3, fsIocFssetxattr}, want: notify},
	{name: "ioctl FICLONE", sys: "ioctl", args: [6]uint64{3, ficlone}, want: notify},
	{name: "ioctl FS_IOC_SET_ENCRYPTION_POLICY", sys: "ioctl", args: [6]uint64{3, 0x800c6613}, want: notify},
	{name: "ioctl FS_IOC_GET_ENCRYPTION_POLICY, numbered _IOW: held, harmlessly", sys: "ioctl", args: [6]uint64{3, 0x400c6615}, want: notify},
	{name: "ioctl setflags, high word", sys: "ioctl", args: [6]uint64{3, highWord | fsIocSetflags}, want: notify},
	// A command's own notifying filter would take the barrier's notifications (the
	// newest filter wins a tie): answering them takes these ioctls, which are held.
	{name: "ioctl SECCOMP_IOCTL_NOTIF_RECV", sys: "ioctl", args: [6]uint64{3, 0xc0502100}, want: notify},
	{name: "ioctl SECCOMP_IOCTL_NOTIF_SEND", sys: "ioctl", args: [6]uint64{3, 0xc0182101}, want: notify},
	{name: "wrong arch", sys: "read", arch: 0x40000003, want: kill},
	{name: "above the table", nr: 472, want: enosys},
}

// heldByName are calls the barrier holds whatever their arguments.
var heldByName = []string{
	"creat", "openat2", "mknod", "mknodat", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat",
	"rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "chmod",
	"fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime",
	"utimes", "futimesat", "utimensat", "truncate", "ftruncate", "fallocate", "setxattr",
	"lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr", "setxattrat",
	"removexattrat", "bind", "recvmsg", "recvmmsg",
}

// passedByName are calls the barrier must let through: the hot paths of every
// program, and the writes through a descriptor a held open gave.
var passedByName = []string{
	"read", "write", "pwrite64", "close", "fstat", "newfstatat", "statx", "mmap", "futex",
	"execve", "clone", "clone3", "wait4", "getdents64", "readlinkat", "copy_file_range",
	"sendfile", "splice", "fsync", "rt_sigreturn", "exit_group", "socket", "connect",
}

func TestBarrierDecisions(t *testing.T) {
	tests := slices.Clone(barrierDecisions)
	for _, s := range heldByName {
		tests = append(tests, decision{name: s + " held", sys: s, args: [6]uint64{3, 0o777, 0o777}, want: notify})
	}
	for _, s := range passedByName {
		tests = append(tests, decision{name: s + " passed", sys: s, want: allow})
	}
	for _, s := range deniedByName {
		tests = append(tests, decision{name: s + " denied", sys: s, want: eperm})
	}
	for _, arch := range arches(t) {
		f := newBarrierFilter(t, arch)
		for _, tt := range tests {
			c := call{nr: tt.nr, arch: tt.arch, args: tt.args}
			if tt.sys != "" {
				nr, ok := arch.Number(tt.sys)
				if !ok {
					continue
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

// TestBarrierMatchesItsPolicy runs every number through the compiled barrier and the
// policy read directly.
func TestBarrierMatchesItsPolicy(t *testing.T) {
	p := Barrier()
	for _, arch := range arches(t) {
		f := newBarrierFilter(t, arch)
		samples := [][6]uint64{{}, {0xffffffffffffffff, 0xffffffffffffffff, 0xffffffffffffffff}, {atFDCWD, tcgets, oRdonly}, {0, oWronly, oCreat}}
		for nr := uint32(0); nr <= arch.max()+3; nr++ {
			for _, args := range samples {
				c := call{nr: nr, arch: arch.audit, args: args}
				if got, want := mustRun(t, f, c), reference(p, arch, c); got != want {
					t.Errorf("%s: nr %d args %#x: got %s; want %s", arch, nr, args[:3], retName(got), retName(want))
				}
			}
		}
	}
}

// TestBarrierCoversDefault: every call Default lets through is reviewed, held or
// passed, and never both; and whatever Default refuses, the barrier does not allow.
func TestBarrierCoversDefault(t *testing.T) {
	held := map[string]bool{"open": true, "openat": true, "ioctl": true, "fcntl": true}
	for _, n := range heldAlways {
		held[n] = true
	}
	passed := map[string]bool{}
	for _, n := range unheld {
		if held[n] {
			t.Errorf("%s is both held and passed", n)
		}
		if passed[n] {
			t.Errorf("%s is passed twice", n)
		}
		passed[n] = true
	}
	b := Barrier()
	for name, r := range Default().Rules {
		if r.Action != Deny && !held[name] && !passed[name] {
			t.Errorf("%s: Default lets it through, and the barrier has not reviewed it", name)
		}
		if r.Action == Deny && b.Rules[name].Action == Allow {
			t.Errorf("%s: Default refuses it, and the barrier allows it", name)
		}
	}
	for n := range passed {
		if r, ok := Default().Rules[n]; !ok || r.Action == Deny {
			t.Errorf("%s is passed by the barrier, and Default does not let it through", n)
		}
	}
}

func newBarrierFilter(t testing.TB, arch Arch) *filter {
	t.Helper()
	raw, err := BarrierProgram(arch)
	if err != nil {
		t.Fatal(err)
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("program has instructions bpf.Disassemble does not know")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	return &filter{arch: arch, raw: raw, vm: vm}
}

// TestReceiving: recvmsg and recvmmsg, the calls that may bring a descriptor in, are
// named by their number on each arch; no other held call is.
func TestReceiving(t *testing.T) {
	for _, goarch := range []string{"amd64", "arm64"} {
		arch, err := ArchFor(goarch)
		if err != nil {
			t.Fatal(err)
		}
		nrs := Receiving(arch)
		if len(nrs) != 2 {
			t.Errorf("%s: Receiving = %v; want recvmsg's and recvmmsg's", goarch, nrs)
		}
		for _, name := range heldAlways {
			nr, ok := arch.Number(name)
			if !ok {
				continue
			}
			want := name == "recvmsg" || name == "recvmmsg"
			if got := slices.Contains(nrs, int32(nr)); got != want {
				t.Errorf("%s: %s (%d) in Receiving: %v; want %v", goarch, name, nr, got, want)
			}
		}
	}
}
