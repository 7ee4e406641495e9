//go:build !noengines || !linux

package cli

import "github.com/cordonhq/cordon/placement/kubernetes/podseccomp"

// printSeccompProfile prints the Pod's seccomp profile for this machine's
// architecture.
func printSeccompProfile(stdio IO) error {
	b, err := podseccomp.Profile()
	if err != nil {
		return failed(err)
	}
	_, err = stdio.Stdout.Write(b)
	return err
}
