// Package seccomp compiles the system call policy of a sandbox's commands into a
// classic-BPF seccomp program. It is pure: it builds the program on any GOOS and
// GOARCH, for either arch it knows, and loads nothing: internal/linux.LoadSeccompThread
// installs it.
//
// The program is an allowlist in effect. It kills a process that calls through
// another ABI (a foreign arch or, on amd64, x32), answers ENOSYS to numbers past the
// newest system call the table knows (so calls added to future kernels stay denied
// until they are reviewed), and then walks a balanced binary tree over the sorted
// call numbers: about log2(ranges) comparisons, not one per denied call. [Default]
// says what each call gets.
//
// [linux.LoadSeccompThread]: github.com/cordonhq/cordon/internal/linux.LoadSeccompThread
package seccomp

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/net/bpf"
)

// Errors returned by [Policy.Compile], [Program] and [ArchFor]. Test with errors.Is.
var (
	// ErrArch: the arch is not one this package has a system call table for.
	ErrArch = errors.New("unsupported arch")
	// ErrPolicy: the policy is malformed (an unknown action, a bad argument test).
	ErrPolicy = errors.New("invalid seccomp policy")
)

// Action is what the filter does with a system call. The zero value, Deny, is the
// safe one: a [Rule] left unset denies.
type Action uint8

// Actions a [Rule] may take.
const (
	// Deny fails the call with EPERM, as Docker's default profile does.
	Deny Action = iota
	// Allow lets the call through to the kernel.
	Allow
	// NoSys fails the call with ENOSYS, which libc reads as "this kernel lacks it"
	// and falls back (clone3 to clone).
	NoSys
	// Kill kills the whole process (SECCOMP_RET_KILL_PROCESS).
	Kill
	// Notify holds the call until the filter's listener answers it
	// (SECCOMP_RET_USER_NOTIF): the barrier's action ([Barrier]). With no listener
	// the kernel fails the call with ENOSYS. Another filter's Deny, NoSys or Kill
	// still wins over it: the kernel takes the strictest verdict of all filters.
	Notify
)

// String returns the action's name.
func (a Action) String() string {
	switch a {
	case Deny:
		return "deny"
	case Allow:
		return "allow"
	case NoSys:
		return "nosys"
	case Kill:
		return "kill"
	case Notify:
		return "notify"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Return values of a seccomp filter (linux/seccomp.h, asm-generic/errno-base.h).
const (
	retKillProcess = 0x80000000
	retAllow       = 0x7fff0000
	retUserNotif   = 0x7fc00000
	retErrno       = 0x00050000
	errnoEPERM     = 1
	errnoENOSYS    = 38
)

// ret is the filter's return value for a.
func (a Action) ret() (uint32, error) {
	switch a {
	case Deny:
		return retErrno | errnoEPERM, nil
	case Allow:
		return retAllow, nil
	case NoSys:
		return retErrno | errnoENOSYS, nil
	case Kill:
		return retKillProcess, nil
	case Notify:
		return retUserNotif, nil
	}
	return 0, fmt.Errorf("%w: unknown action %d", ErrPolicy, uint8(a))
}

// Op is how a [Cond] compares an argument with its values.
type Op uint8

// Ops of a [Cond]. The zero Op is invalid, so a half-filled Cond fails to compile.
const (
	_ Op = iota
	// In holds when the argument is one of Values.
	In
	// NotIn holds when the argument is none of Values.
	NotIn
	// AnyBit holds when the argument has any bit of any of Values set.
	AnyBit
)

// String returns the op's name.
func (o Op) String() string {
	switch o {
	case In:
		return "in"
	case NotIn:
		return "not-in"
	case AnyBit:
		return "any-bit"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Cond is a test on one argument of a system call. It compares the argument's low 32
// bits only: every argument the default policy tests is an int or unsigned int in
// the kernel's prototype (socket's family, ioctl's request, personality's persona),
// or clone's unsigned long flags, of which the kernel reads only the low word
// (kernel/fork.c: lower_32_bits(clone_flags)). Ignoring the high word is therefore
// exact, not a loophole: setting it changes nothing the kernel does.
type Cond struct {
	Arg    int      // argument index, 0 to 5
	Op     Op       // how to compare
	Values []uint32 // what to compare with; at least one
}

// Rule says what the filter does with one system call: Action, unless one of DenyIf
// holds, in which case OnMatch (Deny when unset). The zero Rule denies.
type Rule struct {
	Action  Action
	DenyIf  []Cond
	OnMatch Action // what a call that one of DenyIf holds for gets; zero: Deny
}

// Policy maps system call names, as golang.org/x/sys/unix spells them without the
// SYS_ prefix and in lower case ("openat", "clone3"), to rules. A call the arch's
// table knows but the policy does not name is denied (EPERM); a number the table
// does not know gets ENOSYS. Names the arch lacks ("open" on arm64) are ignored, so
// one policy serves every arch.
type Policy struct {
	Rules map[string]Rule
}

// Program returns the sandbox's filter, [Default] compiled for arch. For the arches
// compiled ahead (program_gen.go, which TestProgramCompiledAhead keeps equal to
// Default().Compile) it is a copy of that: process 1 needs it at every start, and
// compiling it there cost about a millisecond of CPU.
func Program(arch Arch) ([]bpf.RawInstruction, error) {
	if p := compiledAhead(arch.name); p != nil {
		return slices.Clone(p), nil
	}
	return Default().Compile(arch)
}
