package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/contract"
)

func newCheckCmd(stdio IO) *cobra.Command {
	var file, auditDir string
	var asJSON bool
	c := &cobra.Command{
		Use:   "check [flags]",
		Short: "validate a contract",
		Long: `Validates the contract (-c FILE, else ./cordon.yaml, else the built-in default) exactly as
run would compile it on this host, and prints its widenings and notes.

Exit status: 0 valid, 1 invalid (FILE:LINE:COL: message per problem), 2 usage error.`,
		Example: `  cordon check
  cordon check -c cordon.yaml
  cordon check -c cordon.yaml --json | jq .valid`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error { return checkCmd(stdio, file, auditDir, asJSON) },
	}
	f := c.Flags()
	contractFlag(f, &file)
	auditDirFlag(f, &auditDir)
	f.BoolVar(&asJSON, "json", false, `print {"schema": "`+schemaCheck+`", contract, valid, problems: [...], widenings: [{path, access, why, where}], notes: [...]}`)
	return c
}

// checkJSON is `cordon check --json`.
type checkJSON struct {
	Schema    string                  `json:"schema"`
	Contract  string                  `json:"contract"` // the file, or "built-in default contract"
	Valid     bool                    `json:"valid"`
	Problems  []string                `json:"problems"`  // FILE:LINE:COL: message, one per problem
	Widenings []contract.WideningPlan `json:"widenings"` // {path, access, why, where}
	Notes     []string                `json:"notes"`
}

func checkCmd(stdio IO, file, auditDir string, asJSON bool) error {
	p, c, err := planOf(file, auditDir, nil)
	out := checkJSON{Schema: schemaCheck, Contract: file, Valid: err == nil, Problems: []string{}, Widenings: []contract.WideningPlan{}, Notes: []string{}}
	if c != nil && c.File != "" {
		out.Contract = c.File
	}
	if out.Contract == "" {
		out.Contract = "built-in default contract"
	}
	if err != nil {
		out.Problems = problems(err)
	} else {
		out.Widenings = append(out.Widenings, p.Widenings...)
		out.Notes = append(out.Notes, p.Notes...)
	}
	switch {
	case asJSON:
		if jerr := writeJSON(stdio.Stdout, out); jerr != nil {
			return jerr
		}
	case err != nil:
		for _, line := range out.Problems {
			fmt.Fprintln(stdio.Stdout, line)
		}
	default:
		for _, w := range p.Widenings {
			fmt.Fprintf(stdio.Stdout, "%s: widening: %s is %s (%s)\n", w.Where, w.Path, accessWord(w.Access), w.Why)
		}
		for _, n := range p.Notes {
			fmt.Fprintf(stdio.Stdout, "%s: note: %s\n", out.Contract, n)
		}
		fmt.Fprintf(stdio.Stdout, "%s: valid\n", out.Contract)
	}
	if err != nil {
		return errdefs.Exit(errdefs.ExitFailure)
	}
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
