package seccomp

import (
	"fmt"
	"runtime"
)

// Arch is a system call ABI the filter accepts: the AUDIT_ARCH value the kernel puts
// in seccomp_data.arch and that ABI's system call numbers. Both arches are
// little-endian, which is how the filter reads 64-bit arguments.
type Arch struct {
	name  string   // GOARCH
	audit uint32   // AUDIT_ARCH_*
	x32   bool     // the ABI has an x32 twin, told apart by bit 30 of the number
	table []sysnum // sorted by number
}

// sysnum is one system call of an arch's table.
type sysnum struct {
	name string
	nr   uint32
}

// AUDIT_ARCH values (linux/audit.h: EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE).
const (
	auditArchX86_64  = 0xc000003e
	auditArchAARCH64 = 0xc00000b7
)

// x32Bit marks an x32 system call on amd64 (__X32_SYSCALL_BIT). The x32 ABI reaches
// the same kernel entry points under other numbers, so a filter that let it through
// would be bypassed by numbering alone.
const x32Bit = 0x40000000

// ArchFor returns the arch of a GOARCH name: "amd64" or "arm64".
func ArchFor(goarch string) (Arch, error) {
	switch goarch {
	case "amd64":
		return Arch{name: goarch, audit: auditArchX86_64, x32: true, table: x86_64Table}, nil
	case "arm64":
		return Arch{name: goarch, audit: auditArchAARCH64, table: aarch64Table}, nil
	}
	return Arch{}, fmt.Errorf("%w: %q", ErrArch, goarch)
}

// Native returns the arch of the running binary, runtime.GOARCH.
func Native() (Arch, error) {
	return ArchFor(runtime.GOARCH)
}

// String returns the arch's GOARCH name.
func (a Arch) String() string { return a.name }

// Audit returns the arch's AUDIT_ARCH value, as seccomp_data.arch carries it.
func (a Arch) Audit() uint32 { return a.audit }

// Number returns the number of the system call name on this arch, and false when the
// arch has no such call.
func (a Arch) Number(name string) (uint32, bool) {
	for _, s := range a.table {
		if s.name == name {
			return s.nr, true
		}
	}
	return 0, false
}

// max returns the highest system call number in the table.
func (a Arch) max() uint32 {
	return a.table[len(a.table)-1].nr
}
