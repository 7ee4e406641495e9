package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/providers"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/monitor"
	"github.com/cordonhq/cordon/runner"
)

func newGCCmd(stdio IO) *cobra.Command {
	var root string
	c := &cobra.Command{
		Use:   "gc [flags]",
		Short: "remove what crashed runs left behind",
		Long: `Removes what runs whose cordon is gone left behind: run directories, host uids leased
to their sandboxes, containers, tasks and snapshots, and revokes their credentials (the
ledger is reconciled).`,
		Example: "  cordon gc",
		Args:    noArgs,
		RunE:    func(c *cobra.Command, args []string) error { return gcCmd(c.Context(), stdio, root) },
	}
	c.Flags().StringVar(&root, "run-root", paths.RunRoot().String(), "run directories `DIR`")
	return c
}

func gcCmd(ctx context.Context, stdio IO, root string) error {
	removed, err := runner.GC(root)
	for _, r := range removed {
		fmt.Fprintf(stdio.Stdout, "removed run %s\n", r)
	}
	// The host uids leased to the sandboxes of dead runs (as root).
	freed, uerr := runner.GCUIDs()
	for _, uid := range freed {
		fmt.Fprintf(stdio.Stdout, "released host uid %d (its run's cordon is gone)\n", uid)
	}
	err = errors.Join(err, uerr)
	for _, b := range knownBackends() { // containers, tasks and snapshots of dead runs
		if c, ok := b.backend.(collector); ok {
			runs, cerr := c.GC(ctx)
			for _, r := range runs {
				fmt.Fprintf(stdio.Stdout, "removed %s container of run %s\n", c.Name(), r)
			}
			err = errors.Join(err, cerr)
		}
	}
	// The monitor's registrations of dead runs, and its programs when no live run uses them.
	if col, merr := monitor.GC(ctx); merr != nil {
		err = errors.Join(err, merr)
	} else {
		for _, st := range col.Stale {
			fmt.Fprintf(stdio.Stdout, "removed the monitor's registration of cgroup %d (cordon %d is gone)\n", st.Cgroup, st.Owner)
		}
		for _, set := range col.Sets {
			fmt.Fprintf(stdio.Stdout, "removed the monitor's programs %s (no run uses them)\n", set)
		}
	}
	// Credentials whose run is gone: revoke them (TTL is only the last backstop).
	if outcomes, cerr := reconcileCredentials(ctx, stdio); cerr != nil {
		err = errors.Join(err, cerr)
	} else {
		for _, o := range outcomes {
			fmt.Fprintf(stdio.Stdout, "credential %s of run %s (%s): %s\n", o.Name, o.Run, o.Provider, o.Result)
		}
	}
	return err
}

// reconcileCredentials revokes the grants recorded in the ledger for runs whose cordon
// is gone, with whatever providers this host has configured.
func reconcileCredentials(ctx context.Context, stdio IO) ([]creds.Outcome, error) {
	provs, err := providers.FromEnv(providers.Config{Root: creds.DefaultRoot(), Stderr: stdio.Stderr})
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	b, err := creds.New(creds.Config{Root: creds.DefaultRoot(), Providers: provs, Alerts: stdio.Stderr})
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return b.Reconcile(ctx, nil)
}
