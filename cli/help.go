package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// helpFunc prints a command's help to stderr, where cordon has always printed it (its
// stdout is the command's output). The same parts make the man pages (man.go).
func helpFunc(stdio IO) func(*cobra.Command, []string) {
	return func(c *cobra.Command, _ []string) {
		writeHelp(stdio.Stderr, c)
	}
}

func writeHelp(w io.Writer, c *cobra.Command) {
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	fmt.Fprintf(w, "%s\n\nUsage: %s\n", strings.TrimSpace(desc), useLine(c))
	if subs := visibleSubs(c); len(subs) > 0 {
		fmt.Fprintln(w, "\nCommands:")
		width := 0
		for _, s := range subs {
			width = max(width, len(s.Name()))
		}
		for _, s := range subs {
			fmt.Fprintf(w, "  %-*s  %s\n", width, s.Name(), s.Short)
		}
	}
	if c.Example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", strings.TrimRight(c.Example, "\n"))
	}
	if f := c.LocalFlags(); f.HasAvailableFlags() {
		fmt.Fprintf(w, "\nFlags:\n%s", f.FlagUsages())
	}
	// --host and its companions, where they do something: the commands that drive a
	// server, and cordon's own help.
	if f := c.InheritedFlags(); f.HasAvailableFlags() && remoteCommands[c.CommandPath()] {
		fmt.Fprintf(w, "\nGlobal flags (a server, docs/serve.md):\n%s", f.FlagUsages())
	}
	if len(visibleSubs(c)) > 0 {
		fmt.Fprintf(w, "\nRun '%s COMMAND --help' for a command's flags.\n", c.CommandPath())
	}
}

// useLine is the synopsis: the command's path and its Use without the name.
func useLine(c *cobra.Command) string {
	if !c.HasParent() {
		return c.Name() + " COMMAND [flags]"
	}
	return c.Parent().CommandPath() + " " + c.Use
}

// visibleSubs are the subcommands help lists: not hidden, not cobra's help.
func visibleSubs(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	for _, s := range c.Commands() {
		if s.IsAvailableCommand() && s.Name() != "help" {
			out = append(out, s)
		}
	}
	return out
}
