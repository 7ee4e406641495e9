package runner

import (
	"sync"
	"unicode/utf8"

	gatewire "github.com/cordonhq/cordon/gate/wire"
)

// Gate decisions a running command's result carries (ExecResult.Gates): the host gate
// service's account of the requests it attributed to the command, which a client of
// the command (the MCP gate tool) takes rather than what the command printed: a
// command's output is the sandbox's word.
const (
	// maxGatesKept is how many of a command's gate requests its result accounts for;
	// more are counted. Asking is one request; a command that files many is refused
	// past the run's gate.MaxPending and gate.MaxRequests, and the log has each.
	maxGatesKept = 4
	// maxGateOutput bounds the operation's output a kept decision holds (its first
	// bytes); the gate service keeps up to gate.MaxOutput, and what the operation
	// printed also went to the command's output.
	maxGateOutput = 64 << 10
)

// gateDecisions keeps, for each running command (from open to take), how its gate
// requests ended.
type gateDecisions struct {
	mu sync.Mutex
	by map[string]*cmdGates // the commands open
}

// cmdGates is what a running command's result says of its gate requests.
type cmdGates struct {
	kept []gatewire.Decided
	n    int
}

// open starts keeping command id's gate requests.
func (g *gateDecisions) open(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.by == nil {
		g.by = map[string]*cmdGates{}
	}
	g.by[id] = &cmdGates{}
}

// keep keeps d, how a gate request attributed to command cmd ended, for cmd's result
// while cmd is open: a request attributed to a command that is not (a process left
// from one that ended) is in the log only.
func (g *gateDecisions) keep(cmd string, d gatewire.Decided) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.by[cmd]
	if c == nil {
		return
	}
	c.n++
	if len(c.kept) >= maxGatesKept {
		return
	}
	if d.Outcome != nil && len(d.Outcome.Output) > maxGateOutput {
		out, n := *d.Outcome, maxGateOutput
		for n > 0 && !utf8.RuneStart(out.Output[n]) {
			n--
		}
		out.Output = out.Output[:n]
		d.Outcome, d.OutputCut = &out, true
	}
	c.kept = append(c.kept, d)
}

// take returns the gate requests of command id that keep kept, in the order they
// ended, and how many more there were, and closes id.
func (g *gateDecisions) take(id string) ([]gatewire.Decided, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.by[id]
	delete(g.by, id)
	if c == nil {
		return nil, 0
	}
	return c.kept, c.n - len(c.kept)
}

// decidedFor takes command id's gate requests (gateDecisions.take), none in a run
// without gates.
func (r *run) decidedFor(id string) ([]gatewire.Decided, int) {
	if r.gates == nil {
		return nil, 0
	}
	return r.gates.decided.take(id)
}
