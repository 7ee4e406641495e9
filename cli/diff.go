package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/contract"
)

// diffJSONVersion versions `cordon diff --json`.
const diffJSONVersion = 1

// diffJSON is the output of `cordon diff --json`.
type diffJSON struct {
	Schema  string       `json:"schema"`
	Version int          `json:"diff_version"`
	Wider   bool         `json:"wider"`   // some change widens: the exit status is 1
	Changes []changeJSON `json:"changes"` // widenings first
}

// changeJSON is one [contract.Change].
type changeJSON struct {
	Kind  string  `json:"kind"`  // filesystem, deny, widen, git, network, credential, gate, monitor, limits, timeout, commands, env, image
	What  string  `json:"what"`  // one sentence
	Old   *string `json:"old"`   // FILE:LINE:COL (FILE alone for a default) in OLD; null when absent there
	New   *string `json:"new"`   // the same in NEW
	Wider bool    `json:"wider"` // false: a narrowing, informational
}

const diffLong = `Compares contract NEW with contract OLD and reports every way NEW lets the sandbox do
more (a widening) or less (a narrowing), with both files' positions. Both are compiled
as run would, for one workspace: a missing or relative workspace key is taken from DIR,
not from the file's directory, so a base branch's contract saved elsewhere compares as
it would run here.

Exit status: 0 NEW is the same or narrower, 1 NEW is wider, 2 usage error or a contract
that does not compile.`

// diffOptions are cordon diff's flags.
type diffOptions struct {
	asJSON        bool
	dir, auditDir string
}

func newDiffCmd(stdio IO) *cobra.Command {
	var o diffOptions
	c := &cobra.Command{
		Use:   "diff [flags] OLD NEW",
		Short: "compare two contracts: every way the new one is wider (exit 1) or narrower",
		Long:  diffLong,
		Example: `  git show main:cordon.yaml > /tmp/base.yaml
  cordon diff /tmp/base.yaml cordon.yaml
  cordon diff /tmp/base.yaml cordon.yaml --json | jq '.changes[] | select(.wider)'`,
		RunE: func(c *cobra.Command, args []string) error { return diffCmd(stdio, o, args) },
	}
	diffFlags(c.Flags(), &o)
	return c
}

func diffFlags(f *pflag.FlagSet, o *diffOptions) {
	f.BoolVar(&o.asJSON, "json", false, `print {"schema": "`+schemaDiff+`", diff_version, wider, changes: [{kind, what, old, new, wider}]}`)
	f.StringVar(&o.dir, "workspace", "", "compile both contracts for workspace `DIR` (default the current directory)")
	auditDirFlag(f, &o.auditDir)
}

func diffCmd(stdio IO, o diffOptions, files []string) error {
	if len(files) != 2 {
		return errdefs.Usagef("diff: want two contracts, OLD and NEW; got %d argument(s)", len(files))
	}
	ws, err := diffWorkspace(o.dir)
	if err != nil {
		return errdefs.Usagef("diff: %w", err)
	}
	var sides [2]contract.Compiled
	for i, role := range []string{"OLD", "NEW"} {
		p, c, err := planFrom(loadFor(files[i], ws), o.auditDir, nil)
		if err != nil {
			return errdefs.Usagef("diff: %s contract %s: %s", role, files[i], strings.Join(problems(err), "\n  "))
		}
		sides[i] = contract.Compiled{Contract: c, Plan: p}
	}
	changes := contract.Compare(sides[0], sides[1])
	contract.WiderFirst(changes)
	if o.asJSON {
		err = writeDiffJSON(stdio, changes)
	} else {
		writeDiff(stdio, changes, files[0], files[1])
	}
	if err != nil {
		return err
	}
	if contract.Wider(changes) {
		return errdefs.Exit(errdefs.ExitFailure)
	}
	return nil
}

// diffWorkspace is the directory both contracts are compiled for: dir, or the current
// directory.
func diffWorkspace(dir string) (string, error) {
	if dir == "" {
		return os.Getwd()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--workspace: %w", err)
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return "", fmt.Errorf("--workspace: %s is not a directory", abs)
	}
	return abs, nil
}

// loadFor reads the contract at file as the contract of workspace ws: a workspace key
// that is missing or relative is taken from ws instead of the file's directory.
func loadFor(file, ws string) func() (*contract.Contract, error) {
	return func() (*contract.Contract, error) {
		c, err := loadContract(file)
		if err != nil {
			return nil, err
		}
		c.ForWorkspace(ws)
		return c, nil
	}
}

func writeDiffJSON(stdio IO, changes []contract.Change) error {
	out := diffJSON{Schema: schemaDiff, Version: diffJSONVersion, Wider: contract.Wider(changes), Changes: []changeJSON{}}
	at := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	for _, c := range changes {
		out.Changes = append(out.Changes, changeJSON{Kind: c.Kind.String(), What: c.What, Old: at(c.Old), New: at(c.New), Wider: c.Wider})
	}
	enc := json.NewEncoder(stdio.Stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// writeDiff prints one line per change, widenings first, then a summary.
func writeDiff(stdio IO, changes []contract.Change, oldFile, newFile string) {
	wider := 0
	for _, c := range changes {
		if c.Wider {
			wider++
		}
		fmt.Fprintln(stdio.Stdout, c)
	}
	narrower := len(changes) - wider
	switch {
	case wider > 0:
		fmt.Fprintf(stdio.Stdout, "%s is wider than %s: %s, %s\n", newFile, oldFile, count(wider, "widening"), count(narrower, "narrowing"))
	case narrower > 0:
		fmt.Fprintf(stdio.Stdout, "%s is narrower than %s: %s\n", newFile, oldFile, count(narrower, "narrowing"))
	default:
		fmt.Fprintf(stdio.Stdout, "%s allows the same as %s\n", newFile, oldFile)
	}
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
