// Command cordon-exec is `cordon exec` on its own: it runs a command in a session
// (cordon session start) with the same flags, output, --json document and exit status,
// from the same code (cli/execcli). It links only the session client, so it
// starts in about half the time of the cordon binary, which carries the runner, the
// contract parser and the rest: use it where a harness runs many commands in a warm
// session (docs/sessions.md). Like cordon exec, it installs no signal handler: a
// SIGINT or SIGTERM ends it at once, and the session ends the command when the
// connection drops.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cordonhq/cordon/cli/execcli"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/trace"
)

func main() {
	began := time.Now()
	trace.OpenFromEnv("cordon-exec") // or --trace FILE, which opens it later
	err := execcli.Run(context.Background(), execcli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, "cordon-exec", os.Args[1:])
	trace.Add("process.init", trace.Initialised(), began)
	trace.Add("cordon.main", began, time.Now())
	if errors.Is(err, execcli.ErrHelp) {
		execcli.WriteHelp(os.Stderr, "cordon-exec")
		err = nil
	}
	if msg := errdefs.Message(err); msg != "" {
		fmt.Fprintln(os.Stderr, "cordon: "+msg)
	}
	os.Exit(errdefs.ExitCode(err))
}
