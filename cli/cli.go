// Package cli is cordon's command line: a thin layer of subcommands over the contract,
// runner and audit packages, built with github.com/spf13/cobra. One file per command;
// every command has --help with examples, flags go before or after the positional
// arguments (except for run and exec, whose flags end at the command), "--" ends the
// flags everywhere, and every command whose output a tool may read has --json
// (docs/cli.md).
package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/sandboxinit"
)

// Version is cordon's version, set at build time with -ldflags "-X ...cli.Version=v".
var Version = "dev"

// IO is where a command reads and writes.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// Run runs cordon with args (without the program name). Its error says how cordon
// exits: errdefs.ExitCode is the status, errdefs.Message what to print (when not
// already printed).
func Run(ctx context.Context, stdio IO, args []string) error {
	if err, ok := runInternal(args); ok {
		return err // process 1 and its helpers: no command tree to build
	}
	if len(args) > 0 {
		delegate(args[0]) // the noengines build hands some commands to cordon-engines
	}
	first := ""
	if len(args) > 0 {
		first = args[0]
	}
	root := newRoot(stdio, first)
	ran := false
	markRuns(root, &ran)
	if len(args) > 0 && strings.HasPrefix(args[0], "__complete") {
		registerFlagCompletions(root)
	}
	root.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
	root.SetIn(stdio.Stdin)
	root.SetOut(stdio.Stdout) // completion scripts; help goes to stderr (helpFunc)
	root.SetErr(stdio.Stderr)
	c, err := root.ExecuteContextC(ctx)
	if err != nil && !ran {
		// cobra's own: an unknown command or flag, a flag's bad value.
		return usageError(c, err)
	}
	return err
}

// runInternal runs the helpers that are process 1 in a sandbox (`internal init`) or
// that it re-executes, before any command tree is built: they start on every run.
func runInternal(args []string) (error, bool) {
	if code, ok := sandboxinit.Dispatch(args); ok {
		return errdefs.Exit(code), true
	}
	return nil, false
}

// commands are cordon's top-level commands.
var commands = []struct {
	name string
	make func(IO) *cobra.Command
}{
	{"run", newRunCmd}, {"apply", newApplyCmd}, {"discard", newDiscardCmd}, {"session", newSessionCmd}, {"exec", newExecCmd}, {"mcp", newMCPCmd}, {"check", newCheckCmd},
	{"explain", newExplainCmd}, {"diff", newDiffCmd}, {"gate", newGateCmd}, {"audit", newAuditCmd}, {"workspace", newWorkspaceCmd},
	{"backends", newBackendsCmd}, {"doctor", newDoctorCmd}, {"gc", newGCCmd}, {"token", newTokenCmd},
	{"serve", newServeCmd},
	{"version", newVersionCmd}, {"internal", newInternalCmd},
}

// newRoot builds cordon's command tree. When first (the first argument) names a
// command, the tree holds only that one: nothing else can run, and a warm cordon exec
// does not pay for building the rest. `internal` (man pages) and anything else (help,
// completion, an unknown command) get the whole tree.
func newRoot(stdio IO, first string) *cobra.Command {
	root := &cobra.Command{
		Use:   "cordon",
		Short: "run commands inside a sandbox built from a reviewed contract",
		Long:  "cordon runs commands inside a sandbox built from a reviewed contract.",
		Example: `  cordon check                      # validate ./cordon.yaml (or the built-in default)
  cordon run -- make test           # run one command in a sandbox
  id=$(cordon session start); cordon exec $id -- go build ./...
  cordon audit show last --diff     # what the last run of this workspace did`,
		Args:                       cobra.ArbitraryArgs,
		SilenceErrors:              true, // main prints errdefs.Message once
		SilenceUsage:               true,
		DisableAutoGenTag:          true,
		SuggestionsMinimumDistance: 2,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				hint := ""
				if s := c.SuggestionsFor(args[0]); len(s) > 0 {
					hint = " (did you mean " + strings.Join(s, " or ") + "?)"
				}
				return errdefs.Usagef("unknown command %q%s; see cordon --help", args[0], hint)
			}
			helpFunc(stdio)(c, nil)
			return errdefs.Exit(errdefs.ExitUsage)
		},
	}
	hostFlags(root)
	root.SetHelpFunc(helpFunc(stdio))
	root.Version = Version // --version, as docker and kubectl have it: `cordon version`'s line
	root.SetVersionTemplate(versionLine() + "\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError(c, err) })
	for _, c := range commands {
		if c.name == first && first != "internal" {
			root.AddCommand(c.make(stdio))
			root.CompletionOptions.DisableDefaultCmd = true // `completion` was not asked for
			return root
		}
	}
	for _, c := range commands {
		root.AddCommand(c.make(stdio))
	}
	completion(stdio, root)
	return root
}

// completion adds cobra's completion command (bash, zsh, fish, powershell) in cordon's
// words.
func completion(stdio IO, root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Use, c.Short = "completion SHELL", "print the shell completion script: bash, zsh, fish or powershell"
			c.Long = `Prints the script that makes SHELL complete cordon's commands, flags, session ids and
run ids (see cordon completion SHELL --help for where to put it).`
			c.Example = `  source <(cordon completion bash)
  cordon completion zsh > "${fpath[1]}/_cordon"
  cordon completion fish > ~/.config/fish/completions/cordon.fish`
			group(stdio, c)
		}
	}
}

// markRuns makes every command's RunE set *ran first, so that Run tells the errors of
// a command (each with its own status) from cobra's (usage errors).
func markRuns(c *cobra.Command, ran *bool) {
	if f := c.RunE; f != nil {
		c.RunE = func(c *cobra.Command, args []string) error {
			*ran = true
			return f(c, args)
		}
	}
	for _, sub := range c.Commands() {
		markRuns(sub, ran)
	}
}

// usageError is a parsing error of c as a usage error (exit 2) that says where to look.
func usageError(c *cobra.Command, err error) error {
	var st *errdefs.Status
	if errors.As(err, &st) {
		return err
	}
	path := "cordon"
	if c != nil {
		path = c.CommandPath()
	}
	name := strings.TrimPrefix(strings.TrimPrefix(path, "cordon"), " ")
	if name != "" {
		name += ": "
	}
	return errdefs.Usagef("%s%w; see %s --help", name, err, path)
}

// group is a command that only holds subcommands: alone it prints its help and exits
// 2; with an unknown subcommand it is a usage error.
func group(stdio IO, c *cobra.Command) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			var names []string
			for _, s := range c.Commands() {
				if !s.Hidden && s.Name() != "help" {
					names = append(names, s.Name())
				}
			}
			return errdefs.Usagef("%s: unknown subcommand %q (%s)", strings.TrimPrefix(c.CommandPath(), "cordon "), args[0], strings.Join(names, ", "))
		}
		helpFunc(stdio)(c, nil)
		return errdefs.Exit(errdefs.ExitUsage)
	}
	return c
}

// noArgs is a usage error when a command that takes no arguments got some.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return errdefs.Usagef("%s: unexpected arguments %s", strings.TrimPrefix(c.CommandPath(), "cordon "), strings.Join(args, " "))
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
