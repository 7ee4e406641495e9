package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/contract"
)

func checkCmd(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("check", "check [-c FILE] [--audit-dir DIR]\n\nExit status: 0 valid, 1 invalid (FILE:LINE:COL: message per problem), 2 usage error.", stdio.Stderr)
	file := contractFlag(fs)
	auditDir := auditDirFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errdefs.Usagef("check: unexpected arguments %s", strings.Join(fs.Args(), " "))
	}
	p, c, err := planOf(*file, *auditDir, nil)
	if err != nil {
		for _, line := range problems(err) {
			fmt.Fprintln(stdio.Stdout, line)
		}
		return errdefs.Exit(errdefs.ExitFailure)
	}
	name := ""
	if c != nil {
		name = c.File
	}
	if name == "" {
		name = "built-in default contract"
	}
	for _, w := range p.Widenings {
		fmt.Fprintf(stdio.Stdout, "%s: widening: %s is %s (%s)\n", w.Where, w.Path, accessWord(w.Access), w.Why)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(stdio.Stdout, "%s: note: %s\n", name, n)
	}
	fmt.Fprintf(stdio.Stdout, "%s: valid\n", name)
	return nil
}

// problems flattens joined errors into one line per contract problem.
func problems(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case *contract.Error:
			out = append(out, x.Error())
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	if len(out) == 0 {
		return strings.Split(errdefs.Message(err), "\n")
	}
	return out
}

func accessWord(a contract.Access) string {
	switch a {
	case contract.ReadWrite:
		return "readable and writable"
	case contract.ReadOnly:
		return "readable"
	}
	return "hidden"
}
