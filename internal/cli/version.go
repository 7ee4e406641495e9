package cli

import (
	"context"
	"fmt"
	"runtime"
)

func versionCmd(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("version", "version", stdio.Stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stdout, "cordon %s (%s, %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
