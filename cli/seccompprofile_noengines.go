//go:build linux && noengines

package cli

import "github.com/cordonhq/cordon/internal/errdefs"

// printSeccompProfile is cordon-engines' (the profile derives from containerd's,
// which this build does not link); reached only when cordon-engines could not be run.
func printSeccompProfile(IO) error { return errdefs.CannotRun(execEngines()) }
