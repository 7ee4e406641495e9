// Command cordon runs AI coding agents and untrusted build steps inside a boundary the
// kernel enforces, under a reviewed YAML contract.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/cordonhq/cordon/cli"
	"github.com/cordonhq/cordon/internal/errdefs"
)

func main() {
	err := cli.Run(context.Background(), cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	if msg := errdefs.Message(err); msg != "" {
		fmt.Fprintln(os.Stderr, "cordon: "+msg)
	}
	os.Exit(errdefs.ExitCode(err))
}
