package wire

// PostureArg is the `internal` subcommand that measures the sandbox from inside:
// `internal posture [--writable PATH]...`, started as an ordinary (confined) command.
// It prints one JSON [Posture] and exits 0 when every check passed, 1 when one failed.
// `cordon doctor` runs it on each backend.
const PostureArg = "posture"

// PostureVersion is the version of [Posture]'s JSON.
const PostureVersion = 1

// Posture is what a command sees of its sandbox: every check `internal posture`
// made, in a fixed order.
type Posture struct {
	// Version is PostureVersion.
	Version int `json:"version"`
	// Checks are the measurements, each with what it should be.
	Checks []PostureCheck `json:"checks"`
}

// PostureCheck is one measurement.
type PostureCheck struct {
	// Name says what was measured ("capabilities", "seccomp: bpf", ...).
	Name string `json:"name"`
	// Want is what a sound sandbox gives, in words ("EPERM", "0", "none").
	Want string `json:"want"`
	// Got is what the command saw.
	Got string `json:"got"`
	// OK is true when Got is what Want says.
	OK bool `json:"ok"`
	// Detail says how it was measured, or what is wrong.
	Detail string `json:"detail,omitempty"`
}

// OK reports whether every check passed (and there was at least one).
func (p *Posture) OK() bool {
	for _, c := range p.Checks {
		if !c.OK {
			return false
		}
	}
	return len(p.Checks) > 0
}
