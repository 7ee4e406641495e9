package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// Exit statuses of [GateMain] besides the operation's own: cordon's (errdefs).
const (
	ExitDenied      = errdefs.ExitFailure   // a person (or the contract) refused, or the request failed
	ExitUsage       = errdefs.ExitUsage     // bad arguments
	ExitUnreachable = errdefs.ExitCannotRun // no gate socket: this sandbox has no gates
)

// GateMain is `cordon gate NAME` inside a sandbox: it asks for the gate, tells stderr
// what it waits for, copies the operation's output to stdout and returns the
// operation's exit status; ExitDenied with the reason on stderr when refused. SIGINT
// and SIGTERM withdraw the request.
func GateMain(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return gateMain(ctx, sandboxSocket(), args, stdout, stderr)
}

func gateMain(ctx context.Context, sock string, args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] == "" || args[0][0] == '-' {
		fmt.Fprintln(stderr, "Usage: cordon gate NAME\n\nAsks a person to approve the contract's gate NAME, which then runs outside the sandbox.\nExit status: the operation's, 1 when refused, 125 when this sandbox has no gates.")
		if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
			return 0
		}
		return ExitUsage
	}
	name := args[0]
	out, err := Ask(ctx, sock, name, stderr)
	switch {
	case errors.Is(err, ErrUnreachable):
		fmt.Fprintf(stderr, "cordon: gate %s: cannot reach the gate socket %s: no gates in this sandbox (the contract declares none, or the run is ending)\n", name, sock)
		return ExitUnreachable
	case errors.Is(err, context.Canceled):
		fmt.Fprintf(stderr, "cordon: gate %s: request withdrawn\n", name)
		return ExitDenied
	case err != nil:
		fmt.Fprintf(stderr, "cordon: gate %s: %v\n", name, err)
		return ExitDenied
	case !out.Approved:
		fmt.Fprintf(stderr, "cordon: gate %s: denied by %s: %s\n", name, out.By, out.Why)
		return ExitDenied
	}
	io.WriteString(stdout, out.Output)
	if out.ExitCode != 0 {
		fmt.Fprintf(stderr, "cordon: gate %s: approved by %s; the operation exited with status %d\n", name, out.By, out.ExitCode)
	}
	return out.ExitCode
}

// RequestArg is the `internal` subcommand that is GateMain in either binary that can
// be the sandbox's helper (cordon-init and cordon): `internal gate-request NAME`. The
// MCP gate tool runs it, so that a gate named like a `cordon gate` subcommand (ls,
// show) is asked for, never listed.
const RequestArg = "gate-request"
