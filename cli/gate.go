package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"

	"github.com/cordonhq/cordon/gate"
	"github.com/cordonhq/cordon/gate/wire"
)

func newGateCmd(stdio IO) *cobra.Command {
	c := &cobra.Command{
		Use:   "gate COMMAND | cordon gate [request] NAME",
		Short: "list, show, approve and deny requests to run a contract's gates",
		Long: `Lists, shows, approves and denies the pending requests of every live run and session on
this host to run one of its contract's gates. Inside a sandbox, cordon gate [request] NAME
asks for the contract's gate NAME ("request" is needed for gates named ls, show, approve
or deny).

Exit status: 0 ok, 1 no pending request has that ID, 2 usage.`,
		Example: `  cordon gate ls
  cordon gate show $req
  cordon gate approve $req
  cordon gate deny $req --why "not on a Friday"
  cordon gate push                # inside a sandbox: ask for the gate named push`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				helpFunc(stdio)(c, nil)
				return errdefs.Exit(errdefs.ExitUsage)
			}
			return gateRequest(stdio, args)
		},
	}
	request := &cobra.Command{
		Use:   "request NAME",
		Short: "inside a sandbox: ask for the contract's gate NAME",
		Long: `Inside a sandbox: asks a person to approve the contract's gate NAME, which then runs
outside the sandbox. Exit status: the operation's, 1 when refused, 125 when this sandbox
has no gates.`,
		Example: "  cordon gate request ls        # a gate named like a subcommand",
		RunE:    func(c *cobra.Command, args []string) error { return gateRequest(stdio, args) },
	}
	c.AddCommand(newGateLsCmd(stdio), newGateShowCmd(stdio), newGateDecideCmd(stdio, "approve"), newGateDecideCmd(stdio, "deny"), request)
	return c
}

// gateRequest is `cordon gate [request] NAME`, in a sandbox.
func gateRequest(stdio IO, args []string) error {
	if code := wire.GateMain(args, stdio.Stdout, stdio.Stderr); code != 0 {
		return errdefs.Exit(code)
	}
	return nil
}

func runRootFlag(f *pflag.FlagSet, p *string) {
	f.StringVar(p, "run-root", paths.RunRoot().String(), "run `DIR` whose gates/ holds the runs' admin sockets")
}

func newGateLsCmd(stdio IO) *cobra.Command {
	var root string
	var asJSON bool
	c := &cobra.Command{
		Use:   "ls [flags]",
		Short: "pending requests of every live run and session on this host",
		Long:  "Lists the pending gate requests of every live run and session on this host, oldest first.",
		Example: `  cordon gate ls
  cordon gate ls --json | jq -r '.pending[].id'`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 0 {
				return errdefs.Usagef("gate ls: takes no arguments")
			}
			if cl, err := remoteOf(c, "run-root"); err != nil || cl != nil {
				return orRemote(err, func() error { return gateLsRemote(c, stdio, cl, asJSON) })
			}
			return gateList(c.Context(), stdio, root, asJSON)
		},
	}
	runRootFlag(c.Flags(), &root)
	c.Flags().BoolVar(&asJSON, "json", false, `print {"schema": "`+schemaGateLs+`", "gate_ls_version": 1, "pending": [...]}`)
	return c
}

func gateList(ctx context.Context, stdio IO, root string, asJSON bool) error {
	return printGateList(stdio, gate.NewList(gate.PendingAll(ctx, root, gateReport(stdio.Stderr))), asJSON)
}

// printGateList prints the pending requests of l, of this host or of a server.
func printGateList(stdio IO, l gate.List, asJSON bool) error {
	if asJSON {
		return writeJSON(stdio.Stdout, l)
	}
	ps := l.Pending
	if len(ps) == 0 {
		fmt.Fprintln(stdio.Stdout, "no pending gate requests")
		return nil
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRUN\tGATE\tWAITING\tRUNS")
	for _, p := range ps {
		wait := time.Since(p.Requested).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.ID, p.Run, p.Gate, wait, clip(strings.Join(p.Argv, " "), 60))
	}
	tw.Flush()
	fmt.Fprintln(stdio.Stdout, "\n`cordon gate show ID` shows what a request would publish.")
	return nil
}

func newGateShowCmd(stdio IO) *cobra.Command {
	var root string
	var asJSON bool
	c := &cobra.Command{
		Use:   "show [flags] ID",
		Short: "one request: what it would run and a preview of what it would publish",
		Long:  "Shows pending request ID: the gate, what it would run, and a preview of what it would publish.",
		Example: `  cordon gate show $req
  cordon gate show $req --json | jq -r .request.preview`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errdefs.Usagef("gate show: want one ID")
			}
			if cl, err := remoteOf(c, "run-root"); err != nil || cl != nil {
				return orRemote(err, func() error { return gateShowRemote(c, stdio, cl, args[0], asJSON) })
			}
			return gateShow(c.Context(), stdio, root, args[0], asJSON)
		},
	}
	runRootFlag(c.Flags(), &root)
	c.Flags().BoolVar(&asJSON, "json", false, `print {"schema": "`+schemaGateShow+`", "request": {...}}`)
	return c
}

func gateShow(ctx context.Context, stdio IO, root, id string, asJSON bool) error {
	p, err := gate.Find(ctx, root, id, gateReport(stdio.Stderr))
	if errors.Is(err, gate.ErrNotFound) {
		return errdefs.Exitf(errdefs.ExitFailure, "gate show: no pending request %q (see cordon gate ls)", id)
	}
	if err != nil {
		return err
	}
	return printGateShow(stdio, gate.NewShow(p), asJSON)
}

// printGateShow prints one pending request, of this host or of a server.
func printGateShow(stdio IO, s gate.Show, asJSON bool) error {
	if asJSON {
		return writeJSON(stdio.Stdout, s)
	}
	p, w := s.Request, stdio.Stdout
	fmt.Fprintf(w, "request %s: gate %s of run %s\n", p.ID, p.Gate, p.Run)
	fmt.Fprintf(w, "requested %s", p.Requested.Local().Format(time.RFC3339))
	if p.Cmd != "" {
		fmt.Fprintf(w, " by command %s", p.Cmd)
	}
	fmt.Fprintf(w, "\nwhy (from the contract): %s\n\n%s\n", p.Why, strings.TrimRight(p.Preview, "\n"))
	fmt.Fprintf(w, "\ncordon gate approve %s   |   cordon gate deny %s --why TEXT\n", p.ID, p.ID)
	return nil
}

func newGateDecideCmd(stdio IO, verb string) *cobra.Command {
	var root, why string
	c := &cobra.Command{
		Use:     verb + " ID",
		Short:   "run the operation (on the host, outside the sandbox); the requester gets its output",
		Long:    "Approves pending request ID: its operation runs now, on the host, and its output goes to the requester.",
		Example: "  cordon gate approve $req",
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return errdefs.Usagef("gate %s: want one ID", verb)
			}
			if cl, err := remoteOf(c, "run-root"); err != nil || cl != nil {
				return orRemote(err, func() error { return gateDecideRemote(c, stdio, cl, verb, args[0], why) })
			}
			return gateDecide(c.Context(), stdio, verb, root, args[0], why)
		},
	}
	runRootFlag(c.Flags(), &root)
	if verb == "deny" {
		c.Use, c.Short = "deny [flags] ID", "refuse it; the requester gets the reason"
		c.Long = "Denies pending request ID; the requester is told --why."
		c.Example = `  cordon gate deny $req --why "publish from CI instead"`
		c.Flags().StringVar(&why, "why", "", "the reason (`TEXT`) the requester is told")
	}
	return c
}

func gateDecide(ctx context.Context, stdio IO, verb, root, id, why string) error {
	err := gate.Decide(ctx, root, gate.Decision{ID: id, By: approver(), Deny: verb == "deny", Why: why})
	return gateDecided(stdio, verb, id, err)
}

// gateDecided reports a decision on request id, taken here or by a server.
func gateDecided(stdio IO, verb, id string, err error) error {
	switch {
	case errors.Is(err, gate.ErrNotFound):
		return errdefs.Exitf(errdefs.ExitFailure, "gate %s: no pending request %q (see cordon gate ls)", verb, id)
	case err != nil:
		return errdefs.CannotRun(fmt.Errorf("gate %s: %w", verb, err))
	case verb == "approve":
		fmt.Fprintf(stdio.Stdout, "approved %s; the operation runs now and its output goes to the requester\n", id)
	default:
		fmt.Fprintf(stdio.Stdout, "denied %s\n", id)
	}
	return nil
}

// gateReport reports a run's admin socket that failed on stderr.
func gateReport(stderr io.Writer) func(sock string, err error) {
	return func(sock string, err error) {
		fmt.Fprintf(stderr, "cordon: gate: %s: %v\n", filepath.Base(sock), err)
	}
}

// approver is the host user's name, recorded as the decision's "by".
func approver() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "uid " + strconv.Itoa(os.Getuid())
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
