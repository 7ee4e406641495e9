package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// runSel holds the flags that pick the run of show, verify, report and export.
type runSel struct {
	dir      *string
	all      *bool
	contract *string
}

func runSelFlags(fs *flag.FlagSet) runSel {
	return runSel{
		dir:      auditDirFlag(fs),
		all:      fs.Bool("all", false, "with last: the newest run of any workspace, not only this one"),
		contract: fs.String("c", "", "with last: the workspace is this contract `FILE`'s (default ./cordon.yaml if present, else the current directory)"),
	}
}

// run parses flags (before or after the argument) and the single RUN|last argument.
func (s runSel) run(fs *flag.FlagSet, args []string) (audit.Run, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return audit.Run{}, err
	}
	if len(pos) != 1 {
		fs.Usage()
		return audit.Run{}, errdefs.Usagef("want one RUN id or \"last\"")
	}
	root, err := auditRoot(*s.dir)
	if err != nil {
		return audit.Run{}, err
	}
	if pos[0] != "last" {
		return audit.Open(root, pos[0])
	}
	if *s.all {
		return audit.Latest(root, "")
	}
	ws, err := currentWorkspace(*s.contract)
	if err != nil {
		return audit.Run{}, err
	}
	run, err := audit.Latest(root, ws)
	if err != nil {
		return audit.Run{}, fmt.Errorf("%w (last --all picks the newest run of any workspace)", err)
	}
	return run, nil
}

// currentWorkspace is the workspace `cordon run` would use here: the one the contract
// (-c, ./cordon.yaml, or the built-in default) compiles to, or, when it does not
// compile, the current directory with its symbolic links resolved. The workspace a run
// records in run.start is resolved the same way, so the two compare as strings.
func currentWorkspace(file string) (string, error) {
	p, _, err := compile(func() (*contract.Contract, error) { return loadContract(file) })
	switch {
	case err == nil:
		return p.Workspace, nil
	case file != "":
		return "", err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("current workspace: %w", err)
	}
	if r, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = r
	}
	return cwd, nil
}
