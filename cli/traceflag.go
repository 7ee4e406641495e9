package cli

import (
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/trace"
)

// traceUsage is --trace's help.
const traceUsage = "append the run's phases (each span's start and end on the critical path) as JSON lines to `FILE` (also $CORDON_TRACE)"

// traceFlag adds --trace FILE, defaulting to $CORDON_TRACE.
func traceFlag(f *pflag.FlagSet, p *string) {
	f.StringVar(p, "trace", "", traceUsage)
}

// openTrace starts tracing to path; nothing when it is empty ($CORDON_TRACE, when
// set, was opened by main already). The path is not put in the environment: cordon
// run and exec start no cordon process that would append to it, and the sandbox's
// environment must not name a host file. A session's supervisor traces when the
// session was started with $CORDON_TRACE set.
func openTrace(path string) error {
	if path == "" {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return errdefs.Invalidf("--trace: %w", err)
	}
	if err := trace.Open(abs, "cordon"); err != nil {
		return errdefs.Invalidf("--trace: %w", err)
	}
	return nil
}
