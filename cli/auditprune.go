package cli

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/server/api"
	"github.com/cordonhq/cordon/session/remote"
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
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := remoteOf(c, "audit-dir")
			if cl != nil || err != nil {
				return orRemote(err, func() error { return auditPruneRemote(c, stdio, cl, o, args) })
			}
			return auditPrune(stdio, o, args)
		},
	}
	f := c.Flags()
	auditDirFlag(f, &o.dir)
	f.StringVar(&o.older, "older-than", "", "runs that ended longer ago than `D` (a Go duration such as 72h, or days: 30d)")
	f.IntVar(&o.keep, "keep", 0, "keep the `N` newest runs of each workspace, remove the rest")
	f.BoolVar(&o.dry, "dry-run", false, "print what would be removed, remove nothing")
	return c
}

// pruneOpts checks the flags and makes them audit.PruneOptions.
func pruneOpts(o pruneOptions, pos []string) (audit.PruneOptions, error) {
	if len(pos) != 0 {
		return audit.PruneOptions{}, errdefs.Usagef("audit prune: unexpected arguments %s", strings.Join(pos, " "))
	}
	opts := audit.PruneOptions{Keep: o.keep, DryRun: o.dry}
	if o.older != "" {
		var err error
		if opts.OlderThan, err = audit.ParseAge(o.older); err != nil {
			return opts, errdefs.Usagef("audit prune: --older-than: %w", err)
		}
	}
	if o.keep < 0 || (o.older == "" && o.keep == 0) || (o.older != "" && opts.OlderThan <= 0) {
		return opts, errdefs.Usagef("audit prune: give --older-than D (> 0) or --keep N (N ≥ 1)")
	}
	return opts, nil
}

func auditPrune(stdio IO, o pruneOptions, pos []string) error {
	opts, err := pruneOpts(o, pos)
	if err != nil {
		return err
	}
	root, err := auditRoot(o.dir)
	if err != nil {
		return err
	}
	res, err := audit.Prune(root, opts)
	printPruned(stdio, res, o.dry)
	if err != nil {
		return err
	}
	printPruneTotal(stdio, res, o.dry, filepath.Join(root, audit.PruneFile))
	return nil
}

// auditPruneRemote prunes the tenant's runs on the server, printed as here; the
// prune record is in the tenant's audit root on the server.
func auditPruneRemote(c *cobra.Command, stdio IO, cl *remote.Client, o pruneOptions, pos []string) error {
	if _, err := pruneOpts(o, pos); err != nil {
		return err
	}
	r, err := cl.Prune(c.Context(), api.PruneRequest{OlderThan: o.older, Keep: o.keep, DryRun: o.dry})
	if err != nil {
		return err
	}
	var res audit.PruneResult
	for _, p := range r.Removed {
		res.Removed = append(res.Removed, audit.Pruned{Run: p.Run, Workspace: p.Workspace, Started: p.Started, Ended: p.Ended, Lines: p.Lines, Head: p.Head})
	}
	for _, k := range r.Kept {
		res.Kept = append(res.Kept, audit.Skipped{Run: k.Run, Why: k.Why})
	}
	printPruned(stdio, res, o.dry)
	printPruneTotal(stdio, res, o.dry, "the server's prune record")
	return nil
}

func pruneVerb(dry bool) string {
	if dry {
		return "would remove"
	}
	return "removed"
}

// printPruned prints each run a prune removed (or would) and each it kept, and why.
func printPruned(stdio IO, res audit.PruneResult, dry bool) {
	for _, p := range res.Removed {
		fmt.Fprintf(stdio.Stdout, "%s %s  ended %s  workspace %s\n", pruneVerb(dry), p.Run, p.Ended.UTC().Format("2006-01-02 15:04:05Z"), orNone(p.Workspace))
	}
	for _, k := range res.Kept {
		fmt.Fprintf(stdio.Stdout, "kept %s: %s\n", k.Run, k.Why)
	}
}

// printPruneTotal prints the closing line of a prune; record is where removals are
// recorded.
func printPruneTotal(stdio IO, res audit.PruneResult, dry bool, record string) {
	fmt.Fprintf(stdio.Stdout, "%s %d runs, kept %d that are not sealed and intact", pruneVerb(dry), len(res.Removed), len(res.Kept))
	if !dry && len(res.Removed) > 0 {
		fmt.Fprintf(stdio.Stdout, "; recorded in %s", record)
	}
	fmt.Fprintln(stdio.Stdout)
}

func orNone(s string) string {
	if s == "" {
		return "(not recorded)"
	}
	return s
}
