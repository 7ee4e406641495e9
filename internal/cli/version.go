package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

func newVersionCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "print cordon's version",
		Long:    "Prints cordon's version, the Go version it was built with, and its platform.",
		Example: "  cordon version",
		Args:    noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			fmt.Fprintf(stdio.Stdout, "cordon %s (%s, %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
