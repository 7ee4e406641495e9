package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/runner"
)

// A staged session's checkpoints and rollbacks (docs/sessions.md, "Staged sessions"):
// requests to its supervisor, like exec and stop.

func newSessionCheckpointCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "checkpoint SESSION [NAME]",
		Short: "keep a staged session's workspace as it is now, to roll back to",
		Long: `Keeps the workspace of the staged session SESSION (cordon session start --stage) as it
is now, until the session stops, under NAME or a number, and prints the number. One is
taken automatically before each command (cordon session rollback SESSION -1 undoes the
last one). The log records it (session.checkpoint).`,
		Example: `  cordon session checkpoint $id before-refactor
  cordon session rollback $id before-refactor`,
		ValidArgsFunction: completeSessions,
		Args:              cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			name := ""
			if len(args) == 2 {
				name = args[1]
			}
			return sessionCheckpoint(c, stdio, args[0], name)
		},
	}
}

func sessionCheckpoint(c *cobra.Command, stdio IO, id, name string) error {
	sess, err := openSession(c, id)
	if err != nil {
		return clientError(stdio, err)
	}
	cp, problems, err := sess.Checkpoint(c.Context(), name)
	if err != nil {
		return clientError(stdio, err)
	}
	printProblems(stdio, "not kept", problems)
	fmt.Fprintln(stdio.Stdout, cp.N)
	fmt.Fprintf(stdio.Stderr, "cordon: checkpoint %d%s: %d file(s) copied, %d unchanged since the last one\n", cp.N, quotedName(cp.Name), cp.Copied, cp.Linked)
	return nil
}

func newSessionRollbackCmd(stdio IO) *cobra.Command {
	c := &cobra.Command{
		Use:   "rollback SESSION NAME|N|-K",
		Short: "make a staged session's workspace what it was at a checkpoint",
		Long: `Makes the workspace of the staged session SESSION what it was at a checkpoint: one
named NAME, number N, or -K, the K-th latest automatic one (-1: as it was before the
last command; the session keeps the last 20). Processes keep running. It prints the
paths it changed; the log records it (session.rollback, then the rollback's diff).`,
		Example: `  cordon session rollback $id -1        # undo the last command
  cordon session rollback $id before-refactor`,
		ValidArgsFunction: completeSessions,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 2 {
				return errdefs.Usagef("session rollback: give SESSION and a checkpoint (NAME, N or -K)")
			}
			return sessionRollback(c, stdio, args[0], args[1])
		},
	}
	// "-1" is a checkpoint, not a flag: nothing after SESSION is parsed as one.
	c.Flags().SetInterspersed(false)
	return c
}

func sessionRollback(c *cobra.Command, stdio IO, id, to string) error {
	sess, err := openSession(c, id)
	if err != nil {
		return clientError(stdio, err)
	}
	cp, changed, problems, err := sess.Rollback(c.Context(), to)
	more := ""
	if n := len(problems); n > 0 && strings.HasPrefix(problems[n-1], runner.MorePathsPrefix) {
		more, problems = strings.TrimPrefix(problems[n-1], runner.MorePathsPrefix), problems[:n-1]
	}
	printProblems(stdio, "not restored", problems)
	if err != nil {
		return clientError(stdio, err)
	}
	for _, p := range changed {
		fmt.Fprintln(stdio.Stdout, termtext.Line(p))
	}
	fmt.Fprintf(stdio.Stderr, "cordon: rolled back to checkpoint %d%s: %d path(s) changed\n", cp.N, quotedName(cp.Name), len(changed))
	if more != "" {
		fmt.Fprintf(stdio.Stderr, "cordon: and %s\n", termtext.Line(more))
	}
	return nil
}

func printProblems(stdio IO, what string, problems []string) {
	for _, p := range problems {
		fmt.Fprintf(stdio.Stderr, "cordon: %s: %s\n", what, termtext.Line(p))
	}
}

func quotedName(name string) string {
	if name == "" {
		return ""
	}
	return fmt.Sprintf(" (%s)", termtext.Line(name))
}
