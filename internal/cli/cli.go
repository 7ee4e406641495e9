// Package cli is cordon's command line: a thin layer of subcommands over the contract,
// runner and audit packages. One file per command; every command has --help.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// Version is cordon's version, set at build time with -ldflags "-X ...cli.Version=v".
var Version = "dev"

// IO is where a command reads and writes.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	hidden  bool
	run     func(ctx context.Context, io IO, args []string) error
}

func commands() []command {
	return []command{
		{name: "run", summary: "run a command in a sandbox built from the contract", run: runCmd},
		{name: "session", summary: "start, list and stop sessions (one sandboxed run, many commands)", run: sessionCmd},
		{name: "exec", summary: "run a command in a session", run: execCmd},
		{name: "check", summary: "validate a contract", run: checkCmd},
		{name: "explain", summary: "print the compiled plan of a contract", run: explainCmd},
		{name: "diff", summary: "compare two contracts: every way the new one is wider (exit 1) or narrower", run: diffCmd},
		{name: "gate", summary: "list, show, approve and deny requests to run a contract's gates", run: gateCmd},
		{name: "audit", summary: "list, show, verify and report runs' audit logs", run: auditCmd},
		{name: "backends", summary: "list sandbox backends and whether they work here", run: backendsCmd},
		{name: "doctor", summary: "measure each backend's sandbox from inside: what a command can reach", run: doctorCmd},
		{name: "gc", summary: "remove what crashed runs left behind", run: gcCmd},
		{name: "token", summary: "verify tokens cordon issued, or serve RFC 7662 introspection", run: tokenCmd},
		{name: "version", summary: "print cordon's version", run: versionCmd},
		{name: "internal", summary: "internal use only", hidden: true, run: internalCmd},
	}
}

// Run runs cordon with args (without the program name). Its error says how cordon
// exits: errdefs.ExitCode is the status, errdefs.Message what to print (when not
// already printed).
func Run(ctx context.Context, stdio IO, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdio.Stderr)
		if len(args) == 0 {
			return errdefs.Exit(errdefs.ExitUsage)
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			delegate(c.name) // the noengines build hands some commands to cordon-engines
			return c.run(ctx, stdio, args[1:])
		}
	}
	usage(stdio.Stderr)
	return errdefs.Usagef("unknown command %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "cordon runs commands inside a sandbox built from a reviewed contract.")
	fmt.Fprintln(w, "\nUsage: cordon COMMAND [flags]\n\nCommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		if !c.hidden {
			fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w, "\nRun 'cordon COMMAND --help' for a command's flags.")
}

// newFlags returns a FlagSet that prints its usage to w and reports errors as exit 2.
func newFlags(name, synopsis string, w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "Usage: cordon %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags; help is success, a bad flag is a usage error (exit 2).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errdefs.Exit(0)
		}
		return errdefs.Exit(errdefs.ExitUsage)
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
