package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/cordonhq/cordon/runner"
)

func gcCmd(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("gc", "gc [--run-root DIR]", stdio.Stderr)
	root := fs.String("run-root", runner.DefaultRunRoot(), "run directories `DIR`")
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
	return err
}
