package seccomp

import (
	"fmt"
	"maps"
	"slices"

	"golang.org/x/net/bpf"
)

// Offsets in struct seccomp_data (linux/seccomp.h): int nr; __u32 arch;
// __u64 instruction_pointer; __u64 args[6]. Loads are 32-bit, in native byte order.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// maxInsns is the kernel's limit on a classic-BPF program (BPF_MAXINSNS).
const maxInsns = 4096

// maxSkip is the farthest a conditional jump reaches (its offsets are 8-bit).
const maxSkip = 255

// span is a run of consecutive system call numbers from lo up to the next span's lo
// (or the table's maximum), which the filter treats alike: either one action for
// the whole run, or one rule with argument tests for a single call.
type span struct {
	lo   uint32
	rule Rule
}

// Compile returns the filter for arch: the ABI checks, then the decision tree. Names
// the arch lacks are ignored; see [Policy].
func (p Policy) Compile(arch Arch) ([]bpf.RawInstruction, error) {
	if len(arch.table) == 0 {
		return nil, fmt.Errorf("%w: empty arch", ErrArch)
	}
	// Every rule, even one for a call this arch lacks: a policy is wrong or right
	// whatever it is compiled for.
	for _, name := range slices.Sorted(maps.Keys(p.Rules)) {
		if err := p.Rules[name].validate(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	tree, err := treeCode(p.spans(arch))
	if err != nil {
		return nil, err
	}
	prog := append(prologue(arch), tree...)
	if len(prog) > maxInsns {
		return nil, fmt.Errorf("%w: %d instructions, more than the kernel's %d", ErrPolicy, len(prog), maxInsns)
	}
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("assembling seccomp filter: %w", err)
	}
	return raw, nil
}

// prologue kills a call made through another ABI, answers ENOSYS past the table
// (number -1 included), and leaves the call number in A for the tree.
func prologue(arch Arch) []bpf.Instruction {
	kill := bpf.RetConstant{Val: retKillProcess}
	code := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch.audit, SkipTrue: 1},
		kill,
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if arch.x32 {
		// Number -1 is a tracer cancelling the call, not x32: let the kernel answer
		// ENOSYS, as libseccomp does, rather than kill a process under strace or gdb.
		code = append(code,
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: x32Bit, SkipFalse: 2},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0xffffffff, SkipTrue: 1},
			kill,
		)
	}
	return append(code,
		bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: arch.max(), SkipFalse: 1},
		bpf.RetConstant{Val: retErrno | errnoENOSYS},
	)
}

// spans lays the policy over every number from 0 to the table's maximum: numbers the
// table lacks get NoSys, calls the policy does not name get Deny. Neighbours with the
// same plain action merge, so the tree only branches where the action changes.
func (p Policy) spans(arch Arch) []span {
	byNr := make(map[uint32]Rule, len(arch.table))
	for _, s := range arch.table {
		byNr[s.nr] = p.Rules[s.name] // a name the policy lacks gets the zero Rule: Deny
	}
	var spans []span
	for nr := uint32(0); nr <= arch.max(); nr++ {
		r, ok := byNr[nr]
		if !ok {
			r = Rule{Action: NoSys}
		}
		if n := len(spans); n > 0 && len(r.DenyIf) == 0 && len(spans[n-1].rule.DenyIf) == 0 && spans[n-1].rule.Action == r.Action {
			continue
		}
		spans = append(spans, span{lo: nr, rule: r})
	}
	return spans
}

// validate reports whether the rule compiles.
func (r Rule) validate() error {
	if _, err := r.Action.ret(); err != nil {
		return err
	}
	if _, err := r.OnMatch.ret(); err != nil {
		return err
	}
	size := 2 // the two rets of leafCode
	for _, c := range r.DenyIf {
		size += 1 + len(c.Values)
		if size > maxSkip {
			return fmt.Errorf("%w: argument tests too long for 8-bit jumps", ErrPolicy)
		}
		if c.Arg < 0 || c.Arg > 5 {
			return fmt.Errorf("%w: argument %d out of 0 to 5", ErrPolicy, c.Arg)
		}
		if len(c.Values) == 0 {
			return fmt.Errorf("%w: argument %d test has no values", ErrPolicy, c.Arg)
		}
		if c.Op != In && c.Op != NotIn && c.Op != AnyBit {
			return fmt.Errorf("%w: argument %d: unknown op %d", ErrPolicy, c.Arg, uint8(c.Op))
		}
	}
	return nil
}

// treeCode is a balanced binary search over spans, sorted, for a number in A that
// lies within them: each node is one jge, its low half inline after it and its high
// half after that. A node whose low half is too long
// for an 8-bit jump reaches the high half through an unconditional jump.
func treeCode(spans []span) ([]bpf.Instruction, error) {
	if len(spans) == 1 {
		return leafCode(spans[0].rule)
	}
	mid := len(spans) / 2
	low, err := treeCode(spans[:mid])
	if err != nil {
		return nil, err
	}
	high, err := treeCode(spans[mid:])
	if err != nil {
		return nil, err
	}
	var code []bpf.Instruction
	if len(low) <= maxSkip {
		code = []bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: spans[mid].lo, SkipTrue: uint8(len(low))}}
	} else {
		code = []bpf.Instruction{
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: spans[mid].lo, SkipFalse: 1},
			bpf.Jump{Skip: uint32(len(low))},
		}
	}
	code = append(code, low...)
	return append(code, high...), nil
}

// leafCode returns the rule's verdict, testing its arguments first if it has tests:
// each test loads its argument's low word and jumps to the final "ret OnMatch" (EPERM
// unless set) when it holds, else falls through to the next test and finally to
// "ret Action".
func leafCode(r Rule) ([]bpf.Instruction, error) {
	ret, err := r.Action.ret()
	if err != nil {
		return nil, err
	}
	code := []bpf.Instruction{bpf.RetConstant{Val: ret}}
	if len(r.DenyIf) == 0 {
		return code, nil
	}
	matched, err := r.OnMatch.ret()
	if err != nil {
		return nil, err
	}
	code = append(code, bpf.RetConstant{Val: matched})
	// Build from the last test back, so each knows how far the deny is.
	for i := len(r.DenyIf) - 1; i >= 0; i-- {
		test, err := condCode(r.DenyIf[i], len(code)-1)
		if err != nil {
			return nil, err
		}
		code = append(test, code...)
	}
	return code, nil
}

// condCode tests c and jumps to deny, an instruction that many past the test's end,
// when c holds; otherwise it falls through.
func condCode(c Cond, deny int) ([]bpf.Instruction, error) {
	n := len(c.Values) // jumps after the load
	if c.Op == AnyBit {
		n = 1
	}
	if n+deny > maxSkip {
		return nil, fmt.Errorf("%w: argument %d test too long", ErrPolicy, c.Arg)
	}
	code := []bpf.Instruction{bpf.LoadAbsolute{Off: uint32(offArgs + 8*c.Arg), Size: 4}} // the low word, little-endian
	switch c.Op {
	case AnyBit:
		var mask uint32
		for _, v := range c.Values {
			mask |= v
		}
		code = append(code, bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: mask, SkipTrue: uint8(deny)})
	case In:
		for i, v := range c.Values {
			code = append(code, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(n - 1 - i + deny)})
		}
	case NotIn:
		for i, v := range c.Values {
			j := bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(n - 1 - i)}
			if i == n-1 {
				j.SkipFalse = uint8(deny)
			}
			code = append(code, j)
		}
	}
	return code, nil
}
