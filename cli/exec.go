package cli

import (
	"errors"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/cli/execcli"
)

// newExecCmd is `cordon exec`: cobra only names it, and shows its flags in help, man
// page and completion; cli/execcli parses its raw arguments and runs it, as the
// small cordon-exec binary does.
func newExecCmd(stdio IO) *cobra.Command {
	c := &cobra.Command{
		Use:                execcli.Use,
		Short:              execcli.Short,
		Long:               execcli.Long,
		Example:            execcli.Example,
		DisableFlagParsing: true, // execcli parses: [flags] SESSION [flags] [--] CMD...
		ValidArgsFunction:  completeExec,
		RunE: func(c *cobra.Command, args []string) error {
			err := execcli.Run(c.Context(), execcli.IO{Stdin: stdio.Stdin, Stdout: stdio.Stdout, Stderr: stdio.Stderr, OpenRemote: openRemote}, "cordon exec", args)
			if errors.Is(err, execcli.ErrHelp) {
				return c.Help()
			}
			return err
		},
	}
	f := c.Flags()
	for _, fl := range execcli.Flags {
		switch fl.Kind {
		case execcli.Bool:
			if fl.Name != "help" { // cobra's own help flag, in the same words
				f.BoolP(fl.Name, fl.Short, false, fl.Usage)
			}
		case execcli.Duration:
			f.DurationP(fl.Name, fl.Short, 0, fl.Usage)
		case execcli.String:
			f.StringP(fl.Name, fl.Short, "", fl.Usage)
		case execcli.Int:
			n, _ := strconv.Atoi(fl.Default)
			f.IntP(fl.Name, fl.Short, n, fl.Usage)
		}
	}
	return c
}

// completeExec completes exec's arguments, which cobra hands over unparsed: the live
// sessions where SESSION goes, files for a flag's value and for the command.
func completeExec(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	switch {
	case len(toComplete) > 0 && toComplete[0] == '-':
		return nil, cobra.ShellCompDirectiveNoFileComp // cobra completes the flag names
	case execcli.SessionNext(args):
		return completeSessions(c, nil, toComplete)
	}
	return nil, cobra.ShellCompDirectiveDefault
}
