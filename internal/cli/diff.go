package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cordonhq/cordon/internal/errdefs"

	"github.com/cordonhq/cordon/contract"
)

// diffJSONVersion versions `cordon diff --json`.
const diffJSONVersion = 1

// diffJSON is the output of `cordon diff --json`.
type diffJSON struct {
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

const diffSynopsis = `diff [--json] [--workspace DIR] [--audit-dir DIR] OLD NEW

Compares contract NEW with contract OLD and reports every way NEW lets the sandbox do
more (a widening) or less (a narrowing), with both files' positions. Both are compiled
as run would, for one workspace: a missing or relative workspace key is taken from DIR,
not from the file's directory, so a base branch's contract saved elsewhere compares as
it would run here.

Exit status: 0 NEW is the same or narrower, 1 NEW is wider, 2 usage error or a contract
that does not compile.`

func diffCmd(ctx context.Context, stdio IO, args []string) error {
	fs := newFlags("diff", diffSynopsis, stdio.Stderr)
	asJSON := fs.Bool("json", false, "print a JSON object: {diff_version, wider, changes: [{kind, what, old, new, wider}]}")
	dir := fs.String("workspace", "", "compile both contracts for workspace `DIR` (default the current directory)")
	auditDir := auditDirFlag(fs)
	files, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(files) != 2 {
		fs.Usage()
		return errdefs.Usagef("diff: want two contracts, OLD and NEW; got %d argument(s)", len(files))
	}
	ws, err := diffWorkspace(*dir)
	if err != nil {
		return errdefs.Usagef("diff: %w", err)
	}
	var sides [2]contract.Compiled
	for i, role := range []string{"OLD", "NEW"} {
		p, c, err := planFrom(loadFor(files[i], ws), *auditDir, nil)
		if err != nil {
			return errdefs.Usagef("diff: %s contract %s: %s", role, files[i], strings.Join(problems(err), "\n  "))
		}
		sides[i] = contract.Compiled{Contract: c, Plan: p}
	}
	changes := contract.Compare(sides[0], sides[1])
	slices.SortStableFunc(changes, func(a, b contract.Change) int {
		if a.Wider == b.Wider {
			return 0
		}
		if a.Wider {
			return -1
		}
		return 1
	})
	if *asJSON {
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

// parseInterspersed parses flags given before, between or after the positional
// arguments (cordon diff OLD NEW --json), which it returns. Everything after "--" is
// positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
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
		raw := c.Workspace.Value
		if raw == "" {
			raw = "."
		}
		if !filepath.IsAbs(raw) && !strings.HasPrefix(raw, "~") {
			c.Workspace.Value = filepath.Join(ws, raw)
		}
		return c, nil
	}
}

func writeDiffJSON(stdio IO, changes []contract.Change) error {
	out := diffJSON{Version: diffJSONVersion, Wider: contract.Wider(changes), Changes: []changeJSON{}}
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
	at := func(s string) string {
		if s == "" {
			return "absent"
		}
		return s
	}
	wider := 0
	for _, c := range changes {
		dir := "narrower"
		if c.Wider {
			dir = "wider"
			wider++
		}
		fmt.Fprintf(stdio.Stdout, "%s: %s: %s [old: %s, new: %s]\n", dir, c.Kind, c.What, at(c.Old), at(c.New))
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
