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
			fmt.Fprintln(stdio.Stdout, versionLine())
			return nil
		},
	}
}

// versionLine is what `cordon version` and `cordon --version` print.
func versionLine() string {
	return fmt.Sprintf("cordon %s (%s, %s/%s)", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
