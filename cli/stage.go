package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/termtext"
	"github.com/cordonhq/cordon/runner"
)

func newApplyCmd(stdio IO) *cobra.Command {
	var sel runSel
	var force bool
	c := &cobra.Command{
		Use:   "apply [flags] RUN|last [PATH...]",
		Short: "land a staged run's changes in the workspace",
		Long: `Lands the changes of the staged run RUN (cordon run --stage) in its workspace: all of
them, or only those at or below each PATH (relative to the workspace). The run's log
records it (stage.apply) and still verifies.

Nothing lands when the workspace changed underneath a staged path since the run
started: apply names those paths and exits 1; --force lands over them. What the
contract did not let the sandbox write is never landed, and a new git repository or
contract is renamed as a direct run renames it.`,
		Example: `  cordon apply last                  # the last run of this workspace
  cordon apply 20261202T150405Z-ab12cd src/main.go docs/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if cl, err := remoteOf(c, runSelFlags...); err != nil || cl != nil {
				return orRemote(err, func() error { return applyRemote(c, stdio, cl, args, force) })
			}
			run, err := sel.run("apply", args[:1])
			if err != nil {
				return stageError(err)
			}
			res, err := runner.Apply(run.ID, runner.ApplyOptions{AuditRoot: filepath.Dir(run.Dir), Paths: args[1:], Force: force, Stderr: stdio.Stderr})
			printStage(stdio.Stderr, res)
			if err != nil {
				return stageError(err)
			}
			fmt.Fprintf(stdio.Stdout, "applied %d path(s) of run %s; %d still staged\n", len(res.Paths), run.ID, res.Pending)
			return nil
		},
	}
	sel.flags(c.Flags())
	c.Flags().BoolVar(&force, "force", false, "land over paths the workspace changed underneath the stage")
	return c
}

func newDiscardCmd(stdio IO) *cobra.Command {
	var sel runSel
	c := &cobra.Command{
		Use:   "discard [flags] RUN|last",
		Short: "drop a staged run's changes",
		Long: `Drops what the staged run RUN (cordon run --stage) left staged, without touching the
workspace. The run's log records it (stage.discard, with the paths dropped).`,
		Example: "  cordon discard last",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if cl, err := remoteOf(c, runSelFlags...); err != nil || cl != nil {
				return orRemote(err, func() error { return discardRemote(c, stdio, cl, args) })
			}
			run, err := sel.run("discard", args)
			if err != nil {
				return stageError(err)
			}
			res, err := runner.Discard(filepath.Dir(run.Dir), run.ID, runner.DiscardOptions{})
			if err != nil {
				return stageError(err)
			}
			fmt.Fprintf(stdio.Stdout, "discarded %d path(s) of run %s\n", len(res.Paths), run.ID)
			return nil
		},
	}
	sel.flags(c.Flags())
	return c
}

// printStage says, one line each, what apply refused, what conflicted and what it
// renamed; every path is the sandbox's choice of bytes and is escaped.
func printStage(w io.Writer, res runner.StageResult) {
	for _, p := range res.Conflicts {
		fmt.Fprintf(w, "cordon: conflict: %s changed in the workspace since the run started\n", termtext.Line(p))
	}
	for _, p := range res.Refused {
		fmt.Fprintf(w, "cordon: not applied: %s\n", termtext.Line(p))
	}
}

// stageError is apply's and discard's failure: 1 for a conflict or a bad run (nothing
// was landed), the usual categories otherwise.
func stageError(err error) error {
	if errdefs.ExitCode(err) == errdefs.ExitCannotRun || errdefs.ExitCode(err) == errdefs.ExitFailure {
		return errdefs.Exitf(errdefs.ExitFailure, "%s", errdefs.Message(err))
	}
	return err
}
