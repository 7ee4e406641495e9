package cli

import (
	"context"
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
	return err
}
