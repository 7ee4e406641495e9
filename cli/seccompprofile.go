package cli

import (
	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"
)

// newSeccompProfileCmd is `internal seccomp-profile`: it prints the seccomp profile a
// kubernetes placement's Pod names as Localhost (package podseccomp), which a node's
// administrator installs in the kubelet's seccomp directory (docs/kubernetes.md).
func newSeccompProfileCmd(stdio IO) *cobra.Command {
	return &cobra.Command{
		Use:   "seccomp-profile",
		Short: "print the seccomp profile the kubernetes placement's Pods need on every node",
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) != 0 {
				return errdefs.Usagef("internal seccomp-profile: takes no argument")
			}
			return printSeccompProfile(stdio) // seccompprofile_*.go
		},
	}
}
