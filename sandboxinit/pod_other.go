//go:build !linux

package sandboxinit

import (
	"fmt"
	"os"
)

// PodInitMain is unimplemented off Linux (a Pod's process 1 runs on Linux).
func PodInitMain([]string) int {
	fmt.Fprintln(os.Stderr, "cordon: internal init --pod is unimplemented on this GOOS")
	return 1
}

func podInnerMain([]string) int { return PodInitMain(nil) }

// AttachMain is unimplemented off Linux.
func AttachMain([]string) int {
	fmt.Fprintln(os.Stderr, "cordon: internal attach is unimplemented on this GOOS")
	return 1
}

// InstallMain is unimplemented off Linux.
func InstallMain([]string) int {
	fmt.Fprintln(os.Stderr, "cordon: internal install is unimplemented on this GOOS")
	return 1
}

// PodWorkspaceArg is the `internal` subcommand that fills or packs a Pod's workspace.
const PodWorkspaceArg = "podws"

// PodWorkspaceMain is unimplemented off Linux.
func PodWorkspaceMain([]string) int {
	fmt.Fprintln(os.Stderr, "cordon: internal podws is unimplemented on this GOOS")
	return 1
}
