package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/cordonhq/cordon/audit"
	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
)

// runSel holds the flags that pick the run of show, verify, report and export.
type runSel struct {
	dir      string
	all      bool
	contract string
}

func (s *runSel) flags(f *pflag.FlagSet) {
	auditDirFlag(f, &s.dir)
	f.BoolVar(&s.all, "all", false, "with last: the newest run of any workspace, not only this one")
	f.StringVarP(&s.contract, "contract", "c", "", "with last: the workspace is this contract `FILE`'s (default ./cordon.yaml if present, else the current directory)")
}

// run opens the run that the single RUN|last argument of the command name names.
func (s *runSel) run(name string, pos []string) (audit.Run, error) {
	if len(pos) != 1 {
		return audit.Run{}, errdefs.Usagef("%s: want one RUN id or \"last\"", name)
	}
	root, err := auditRoot(s.dir)
	if err != nil {
		return audit.Run{}, err
	}
	if pos[0] != "last" {
		return audit.Open(root, pos[0])
	}
	if s.all {
		return audit.Latest(root, "")
	}
	ws, err := currentWorkspace(s.contract)
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
