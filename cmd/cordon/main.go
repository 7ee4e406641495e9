// Command cordon runs AI coding agents and untrusted build steps inside a boundary the
// kernel enforces, under a reviewed YAML contract.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cordonhq/cordon/internal/cli"
)

func main() {
	err := cli.Run(context.Background(), cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	var ee *cli.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ee.Msg != "" {
			fmt.Fprintln(os.Stderr, "cordon: "+ee.Msg)
		}
		os.Exit(ee.Code)
	default:
		fmt.Fprintln(os.Stderr, "cordon: "+err.Error())
		os.Exit(1)
	}
}
