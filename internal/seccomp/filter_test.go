package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"testing"

	"golang.org/x/net/bpf"
)

// call is one system call as the kernel shows it to a filter.
type call struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

// data returns the call's struct seccomp_data as the kernel lays it out on a
// little-endian machine: 64 bytes, nr, arch, instruction pointer, six arguments.
func (c call) data() []byte {
	b := make([]byte, 64)
	binary.LittleEndian.PutUint32(b[offNr:], c.nr)
	binary.LittleEndian.PutUint32(b[offArch:], c.arch)
	binary.LittleEndian.PutUint64(b[8:], 0x7f0000001000)
	for i, a := range c.args {
		binary.LittleEndian.PutUint64(b[offArgs+8*i:], a)
	}
	return b
}

// vmInput swaps every 32-bit word of data: seccomp loads words in native byte order,
// bpf.VM in network byte order (it is a packet filter), so this is what makes the VM
// read the words the kernel would.
func vmInput(data []byte) []byte {
	out := make([]byte, len(data))
	for i := 0; i+4 <= len(data); i += 4 {
		binary.BigEndian.PutUint32(out[i:], binary.LittleEndian.Uint32(data[i:]))
	}
	return out
}

// filter is a compiled program, ready to run both in bpf.VM and in walk.
type filter struct {
	arch Arch
	raw  []bpf.RawInstruction
	vm   *bpf.VM
}

func newFilter(t testing.TB, arch Arch) *filter {
	t.Helper()
	raw, err := Program(arch)
	if err != nil {
		t.Fatal(err)
	}
	insns, allDecoded := bpf.Disassemble(raw)
	if !allDecoded {
		t.Fatal("program has instructions bpf.Disassemble does not know")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	return &filter{arch: arch, raw: raw, vm: vm}
}

// run returns the filter's verdict on c from bpf.VM, checked against walk, and the
// number of instructions walk executed.
func (f *filter) run(t testing.TB, c call) (uint32, int) {
	t.Helper()
	got, err := f.vm.Run(vmInput(c.data()))
	if err != nil {
		t.Fatal(err)
	}
	ret, steps, err := walk(f.raw, c.data())
	if err != nil {
		t.Fatal(err)
	}
	if uint32(got) != ret {
		t.Fatalf("bpf.VM returns %#x, walk returns %#x", got, ret)
	}
	return ret, steps
}

// walk runs a raw program the way the kernel's seccomp does (native-endian word
// loads), supporting the instructions Compile emits, and counts the instructions it
// executes.
func walk(prog []bpf.RawInstruction, data []byte) (ret uint32, steps int, err error) {
	const ( // linux/bpf_common.h
		ldAbsW = 0x20 // BPF_LD|BPF_W|BPF_ABS
		ja     = 0x05 // BPF_JMP|BPF_JA
		jeq    = 0x15 // BPF_JMP|BPF_JEQ|BPF_K
		jgt    = 0x25 // BPF_JMP|BPF_JGT|BPF_K
		jge    = 0x35 // BPF_JMP|BPF_JGE|BPF_K
		jset   = 0x45 // BPF_JMP|BPF_JSET|BPF_K
		retK   = 0x06 // BPF_RET|BPF_K
	)
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		steps++
		in := prog[pc]
		cond := false
		switch in.Op {
		case ldAbsW:
			if in.K%4 != 0 || int(in.K)+4 > len(data) {
				return 0, steps, fmt.Errorf("pc %d: load at %d", pc, in.K)
			}
			a = binary.LittleEndian.Uint32(data[in.K:])
			continue
		case ja:
			pc += int(in.K)
			continue
		case retK:
			return in.K, steps, nil
		case jeq:
			cond = a == in.K
		case jgt:
			cond = a > in.K
		case jge:
			cond = a >= in.K
		case jset:
			cond = a&in.K != 0
		default:
			return 0, steps, fmt.Errorf("pc %d: op %#x", pc, in.Op)
		}
		if cond {
			pc += int(in.Jt)
		} else {
			pc += int(in.Jf)
		}
	}
	return 0, steps, errors.New("fell off the end")
}

// reference is what p says about c on arch, computed directly from the policy
// rather than through a program.
func reference(p Policy, arch Arch, c call) uint32 {
	switch {
	case c.arch != arch.audit:
		return retKillProcess
	case arch.x32 && c.nr&x32Bit != 0 && c.nr != 0xffffffff:
		return retKillProcess
	}
	for _, s := range arch.table {
		if s.nr != c.nr {
			continue
		}
		r := p.Rules[s.name] // a missing name is the zero Rule: Deny
		for _, cond := range r.DenyIf {
			if holds(cond, uint32(c.args[cond.Arg])) {
				r.Action = r.OnMatch
			}
		}
		ret, _ := r.Action.ret()
		return ret
	}
	return retErrno | errnoENOSYS
}

func holds(c Cond, v uint32) bool {
	for _, w := range c.Values {
		switch {
		case c.Op == AnyBit && v&w != 0, c.Op == In && v == w:
			return true
		case c.Op == NotIn && v == w:
			return false
		}
	}
	return c.Op == NotIn
}

func arches(t testing.TB) []Arch {
	t.Helper()
	var out []Arch
	for _, name := range []string{"amd64", "arm64"} {
		a, err := ArchFor(name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// retName names a filter return value in failure messages.
func retName(r uint32) string {
	switch r {
	case retAllow:
		return "ALLOW"
	case retKillProcess:
		return "KILL_PROCESS"
	case retErrno | errnoEPERM:
		return "EPERM"
	case retErrno | errnoENOSYS:
		return "ENOSYS"
	case retUserNotif:
		return "USER_NOTIF"
	}
	return fmt.Sprintf("%#x", r)
}

func TestEveryNumberMatchesThePolicy(t *testing.T) {
	p := Default()
	for _, arch := range arches(t) {
		t.Run(arch.String(), func(t *testing.T) {
			f := newFilter(t, arch)
			samples := [][6]uint64{
				{},
				{0xffffffffffffffff, 0xffffffffffffffff},
				{afVsock, tiocsti},
				{cloneNewUser | 0x11, tioclinux},
				{afInet6, 0x5401},
			}
			for nr := uint32(0); nr <= arch.max()+3; nr++ {
				for _, args := range samples {
					c := call{nr: nr, arch: arch.audit, args: args}
					if got, want := mustRun(t, f, c), reference(p, arch, c); got != want {
						t.Errorf("nr %d args %#x: got %s; want %s", nr, args[:2], retName(got), retName(want))
					}
				}
			}
		})
	}
}

func mustRun(t *testing.T, f *filter, c call) uint32 {
	t.Helper()
	r, _ := f.run(t, c)
	return r
}

// TestHotPath measures the instructions a call executes: the ABI checks plus one jge
// per tree level, so about log2 of the number of spans.
func TestHotPath(t *testing.T) {
	for _, arch := range arches(t) {
		t.Run(arch.String(), func(t *testing.T) {
			f := newFilter(t, arch)
			spans := Default().spans(arch)
			// arch load+check, nr load, x32 check, max check, tree levels (each with a
			// possible ja), ret.
			limit := 4 + 1 + 2*bits.Len(uint(len(spans)))
			if arch.x32 {
				limit++ // the x32 jset (its -1 check runs only for x32 numbers)
			}
			worst := 0
			for nr := uint32(0); nr <= arch.max(); nr++ {
				_, steps := f.run(t, call{nr: nr, arch: arch.audit})
				worst = max(worst, steps)
			}
			hot := map[string]int{}
			for _, name := range []string{"read", "write", "futex", "openat", "mmap"} {
				nr, _ := arch.Number(name)
				_, hot[name] = f.run(t, call{nr: nr, arch: arch.audit})
			}
			t.Logf("%s: %d instructions, %d spans; hot path %v; worst call %d (limit %d)",
				arch, len(f.raw), len(spans), hot, worst, limit)
			if worst > limit {
				t.Errorf("worst call runs %d instructions; want at most %d", worst, limit)
			}
		})
	}
}

func BenchmarkFilter(b *testing.B) {
	for _, arch := range arches(b) {
		f := newFilter(b, arch)
		for _, name := range []string{"read", "write", "futex"} {
			nr, _ := arch.Number(name)
			c := call{nr: nr, arch: arch.audit}
			in := vmInput(c.data())
			_, steps := f.run(b, c)
			b.Run(arch.String()+"/"+name, func(b *testing.B) {
				for b.Loop() {
					if _, err := f.vm.Run(in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(steps), "insns/call")
			})
		}
	}
}

func TestCompileRejectsMalformedPolicies(t *testing.T) {
	arch, err := ArchFor("amd64")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		rule Rule
	}{
		{"unknown action", Rule{Action: Action(9)}},
		{"zero op", Rule{Action: Allow, DenyIf: []Cond{{Arg: 0, Values: []uint32{1}}}}},
		{"argument 6", Rule{Action: Allow, DenyIf: []Cond{{Arg: 6, Op: In, Values: []uint32{1}}}}},
		{"negative argument", Rule{Action: Allow, DenyIf: []Cond{{Arg: -1, Op: In, Values: []uint32{1}}}}},
		{"no values", Rule{Action: Allow, DenyIf: []Cond{{Arg: 0, Op: NotIn}}}},
		{"too many values", Rule{Action: Allow, DenyIf: []Cond{{Arg: 0, Op: In, Values: make([]uint32, 300)}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Policy{Rules: map[string]Rule{"read": tt.rule}}.Compile(arch)
			if !errors.Is(err, ErrPolicy) {
				t.Errorf("got %v; want ErrPolicy", err)
			}
			// A call amd64 lacks is still checked.
			_, err = Policy{Rules: map[string]Rule{"renameat2": {Action: Allow}, "cacheflush": tt.rule}}.Compile(arch)
			if !errors.Is(err, ErrPolicy) {
				t.Errorf("rule for a call the arch lacks: got %v; want ErrPolicy", err)
			}
		})
	}
	if _, err := ArchFor("riscv64"); !errors.Is(err, ErrArch) {
		t.Errorf("ArchFor(riscv64): got %v; want ErrArch", err)
	}
}

// TestLongJumps compiles a policy whose tree outgrows 8-bit jumps (every other call
// allowed, some with argument tests), so that nodes need the unconditional-jump
// detour, and checks every number against the reference.
func TestLongJumps(t *testing.T) {
	for _, arch := range arches(t) {
		t.Run(arch.String(), func(t *testing.T) {
			p := Policy{Rules: map[string]Rule{}}
			for i, s := range arch.table {
				switch i % 4 {
				case 0:
					p.Rules[s.name] = Rule{Action: Allow}
				case 2:
					p.Rules[s.name] = Rule{Action: Allow, DenyIf: []Cond{{Arg: i % 6, Op: In, Values: []uint32{uint32(i)}}}}
				}
			}
			raw, err := p.Compile(arch)
			if err != nil {
				t.Fatal(err)
			}
			insns, _ := bpf.Disassemble(raw)
			vm, err := bpf.NewVM(insns)
			if err != nil {
				t.Fatal(err)
			}
			f := &filter{arch: arch, raw: raw, vm: vm}
			detours := 0
			for _, in := range insns {
				if _, ok := in.(bpf.Jump); ok {
					detours++
				}
			}
			if detours == 0 {
				t.Fatalf("%d instructions and no unconditional jump: the test no longer tests it", len(raw))
			}
			for nr := uint32(0); nr <= arch.max()+1; nr++ {
				for _, a := range []uint64{0, uint64(nr % 400)} {
					c := call{nr: nr, arch: arch.audit, args: [6]uint64{a, a, a, a, a, a}}
					if got, want := mustRun(t, f, c), reference(p, arch, c); got != want {
						t.Errorf("nr %d arg %d: got %s; want %s", nr, a, retName(got), retName(want))
					}
				}
			}
		})
	}
}
