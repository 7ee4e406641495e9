// Command cordon runs AI coding agents and untrusted build steps inside a boundary the
// kernel enforces, under a reviewed YAML contract.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cordonhq/cordon/cli"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/trace"
)

func main() {
	began := time.Now()
	trace.OpenFromEnv("cordon") // or cordon run --trace FILE, which opens it later
	err := cli.Run(context.Background(), cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	trace.Add("process.init", trace.Initialised(), began)
	trace.Add("cordon.main", began, time.Now())
	if msg := errdefs.Message(err); msg != "" {
		fmt.Fprintln(os.Stderr, "cordon: "+msg)
	}
	os.Exit(errdefs.ExitCode(err))
}
