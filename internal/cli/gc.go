package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/cordonhq/cordon/creds"
	"github.com/cordonhq/cordon/creds/providers"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/monitor"
	"github.com/cordonhq/cordon/runner"
)

func gcCmd(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("gc", "gc [--run-root DIR]", stdio.Stderr)
	root := fs.String("run-root", paths.RunRoot().String(), "run directories `DIR`")
	if err := parse(fs, args); err != nil {
		return err
	}
	removed, err := runner.GC(*root)
	for _, r := range removed {
		fmt.Fprintf(stdio.Stdout, "removed run %s\n", r)
	}
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
