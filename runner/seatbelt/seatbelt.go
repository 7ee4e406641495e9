// Package seatbelt is the macOS backend: it translates a [contract.Plan] into a Seatbelt
// profile (SBPL, the language of sandbox-exec(1)) that the kernel enforces on the command
// and everything it starts. Profile generation ([Generate]) is pure and portable, so that
// `cordon explain --backend seatbelt` shows on any host what a Mac would enforce; running
// a sandbox is macOS's (sandbox_darwin.go, exec_darwin.go), with the portable pieces of
// it (refusals, the environment, the credential files) in runtime.go. The runner serves
// the egress proxy on a loopback port for it ([sandbox.Backend.LoopbackEgress]), and a
// watcher process (package groupwatch) kills the command's process group if cordon
// dies. It has been written and tested on Linux and cross-compiled, never run on a Mac.
package seatbelt

import (
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/runner/sandbox"
)

// Example run-time values `cordon explain` shows: the real ones are chosen at run start.
const (
	ExplainPort   = 49152
	ExplainRunDir = "/private/var/run/cordon/RUN-ID"
)

// Backend runs sandboxes with sandbox-exec on macOS.
type Backend struct{}

// Backend implements every method of sandbox.Backend on every GOOS.
var _ sandbox.Backend = (*Backend)(nil)

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return "seatbelt" }

// HostUID implements sandbox.Backend.HostUID: the sandbox runs as cordon's caller, and
// macOS has no uid of the run's own to lease.
func (b *Backend) HostUID(plan *contract.Plan) (int, bool, error) { return 0, false, nil }

// Warm implements sandbox.Backend.Warm: Start has nothing slow to begin early.
func (b *Backend) Warm(plan *contract.Plan, leased int) (release func()) { return nil }

// CanStage implements sandbox.Backend.CanStage: macOS has no overlay file system for a
// staged run.
func (b *Backend) CanStage() error { return sandbox.ErrNoStage }

// Explain says, for `cordon explain`, what profile the seatbelt backend would apply to
// plan, with example values for what a run chooses at start.
func (b *Backend) Explain(plan *contract.Plan) string {
	prof, err := Generate(plan, Params{ProxyPort: ExplainPort, RunDir: ExplainRunDir})
	if err != nil {
		return "seatbelt backend: no profile for this plan: " + err.Error()
	}
	head := "seatbelt backend: sandbox-exec -p PROFILE, with PROFILE (proxy port and run directory are examples;\n" +
		"a run chooses them at start):\n\n"
	return head + prof.SBPL
}
