package cli

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// pruneOptions are cordon audit prune's flags.
type pruneOptions struct {
	dir, older string
	keep       int
	dry        bool
}

func newAuditPruneCmd(stdio IO) *cobra.Command {
	var o pruneOptions
	c := &cobra.Command{
		Use:   "prune [flags] --older-than D | --keep N",
		Short: "remove sealed runs: --older-than D | --keep N (per workspace)",
		Long: `Removes sealed runs that verify intact, never a live, crashed or tampered one, and records
each in ROOT/` + audit.PruneFile + `. With both flags a run goes only when both allow it.`,
		Example: `  cordon audit prune --older-than 30d --dry-run
  cordon audit prune --keep 20`,
		RunE: func(c *cobra.Command, args []string) error { return auditPrune(stdio, o, args) },
	}
	f := c.Flags()
	auditDirFlag(f, &o.dir)
	f.StringVar(&o.older, "older-than", "", "runs that ended longer ago than `D` (a Go duration such as 72h, or days: 30d)")
	f.IntVar(&o.keep, "keep", 0, "keep the `N` newest runs of each workspace, remove the rest")
	f.BoolVar(&o.dry, "dry-run", false, "print what would be removed, remove nothing")
	return c
}

func auditPrune(stdio IO, o pruneOptions, pos []string) error {
	if len(pos) != 0 {
		return errdefs.Usagef("audit prune: unexpected arguments %s", strings.Join(pos, " "))
	}
	opts := audit.PruneOptions{Keep: o.keep, DryRun: o.dry}
	if o.older != "" {
		var err error
		if opts.OlderThan, err = parseAge(o.older); err != nil {
			return errdefs.Usagef("audit prune: --older-than: %w", err)
		}
	}
	if o.keep < 0 || (o.older == "" && o.keep == 0) || (o.older != "" && opts.OlderThan <= 0) {
		return errdefs.Usagef("audit prune: give --older-than D (> 0) or --keep N (N ≥ 1)")
	}
	root, err := auditRoot(o.dir)
	if err != nil {
		return err
	}
	res, err := audit.Prune(root, opts)
	verb := "removed"
	if o.dry {
		verb = "would remove"
	}
	for _, p := range res.Removed {
		fmt.Fprintf(stdio.Stdout, "%s %s  ended %s  workspace %s\n", verb, p.Run, p.Ended.UTC().Format("2006-01-02 15:04:05Z"), orNone(p.Workspace))
	}
	for _, k := range res.Kept {
		fmt.Fprintf(stdio.Stdout, "kept %s: %s\n", k.Run, k.Why)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdio.Stdout, "%s %d runs, kept %d that are not sealed and intact", verb, len(res.Removed), len(res.Kept))
	if !o.dry && len(res.Removed) > 0 {
		fmt.Fprintf(stdio.Stdout, "; recorded in %s", filepath.Join(root, audit.PruneFile))
	}
	fmt.Fprintln(stdio.Stdout)
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(not recorded)"
	}
	return s
}

// parseAge parses a Go duration or a whole number of days ("30d").
func parseAge(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, fmt.Errorf("%q: want a number of days such as 30d", s)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q: want a duration such as 72h or 30d", s)
	}
	return d, nil
}
