package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/paths"
	"github.com/cordonhq/cordon/runner"
)

// DefaultContractFile is read from the current directory when -c is not given.
const DefaultContractFile = contract.ContractName

// contractFlag adds -c, --contract to a command.
func contractFlag(f *pflag.FlagSet, p *string) {
	f.StringVarP(p, "contract", "c", "", "contract `FILE` (default ./cordon.yaml if present, else the built-in default contract)")
}

// backendFlag adds --backend, whose default is $CORDON_BACKEND, else auto. A name it
// does not know is a usage error, as any bad flag value is.
func backendFlag(f *pflag.FlagSet, p *string) {
	*p = envOr("CORDON_BACKEND", "auto")
	f.Var((*backendName)(p), "backend", "sandbox `backend`: auto, bwrap, docker, containerd, kubernetes, seatbelt ($CORDON_BACKEND)")
}

// backendNames are the names --backend takes.
var backendNames = []string{"auto", "bwrap", "docker", "containerd", "kubernetes", "seatbelt"}

// backendName is --backend's value.
type backendName string

func (b *backendName) String() string { return string(*b) }
func (b *backendName) Type() string   { return "backend" }
func (b *backendName) Set(v string) error {
	if !slices.Contains(backendNames, v) {
		return fmt.Errorf("unknown backend %q (want %s)", v, strings.Join(backendNames, ", "))
	}
	*b = backendName(v)
	return nil
}

// loadContract reads the contract named by -c, ./cordon.yaml, or the built-in default.
func loadContract(file string) (*contract.Contract, error) {
	if file == "" {
		if _, err := os.Stat(DefaultContractFile); err == nil && !placeholder(DefaultContractFile) {
			file = DefaultContractFile
		} else if err == nil {
			return contract.Default(), nil // a running sandbox keeps it from being created
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, errdefs.Invalidf("%w", err)
		} else {
			return contract.Default(), nil
		}
	}
	load := contract.Load
	if file == DefaultContractFile {
		load = contract.LoadRegular // the workspace's: no fifo hangs the run
	}
	c, err := load(file)
	if err != nil {
		if file == DefaultContractFile && emptyEntry(file) {
			return nil, errdefs.Invalidf("%w (an empty %s is no contract: it may be a placeholder a run made where the workspace had none and whose record was lost, to a crash of the machine or to an older cordon killed as its run started; remove it, or write the contract there)", err, file)
		}
		return nil, errdefs.Invalidf("%w", err)
	}
	return c, nil
}

// emptyEntry says whether p is an empty directory or an empty regular file.
func emptyEntry(p string) bool {
	st, err := os.Lstat(p)
	switch {
	case err != nil:
		return false
	case st.IsDir():
		entries, err := os.ReadDir(p)
		return err == nil && len(entries) == 0
	}
	return st.Mode().IsRegular() && st.Size() == 0
}

// compile reads the contract with load and compiles it for this host, protecting the
// given host paths.
func compile(load func() (*contract.Contract, error), protect ...string) (*contract.Plan, *contract.Contract, error) {
	c, err := load()
	if err != nil {
		return nil, nil, err
	}
	h, err := contract.HostFromOS()
	if err != nil {
		return nil, nil, err
	}
	h.Protect = protect
	p, err := contract.Compile(c, h)
	if err != nil {
		return nil, c, errdefs.Invalidf("%w", err)
	}
	return p, c, nil
}

// planOf is the one way every command builds the Plan — check, explain, doctor, run and
// a session's supervisor alike: the same contract lookup (-c, ./cordon.yaml, the
// built-in default), the same host, the same protected paths (paths.Protected: the audit
// root, the run root and the credential ledger), after the same clean-up of crashed runs (whose placeholders must not pass
// for real paths), and the same refusal of what this cordon cannot enforce. So check
// accepts exactly what run runs, and explain prints that plan. gcDone, when not nil,
// hears what the clean-up did.
//
// It also checks every program the host will run because the contract names it
// ([hostPrograms]): one the sandbox could have written is a problem at the entry that
// names it, at check (exit 1) and again at run (exit 125), as the file may have
// changed since. (Each program is checked once more each time it runs.)
func planOf(file, auditDir string, gcDone func(cleaned []string, err error)) (*contract.Plan, *contract.Contract, error) {
	p, c, err := planFrom(func() (*contract.Contract, error) { return loadContract(file) }, auditDir, gcDone)
	if err != nil {
		return nil, c, err
	}
	if _, err := hostPrograms(p); err != nil {
		return nil, c, errdefs.Invalidf("%w", err)
	}
	return p, c, nil
}

// planFrom is [planOf] for a contract that load reads: cordon diff reads two files and
// compiles both for one workspace.
func planFrom(load func() (*contract.Contract, error), auditDir string, gcDone func(cleaned []string, err error)) (*contract.Plan, *contract.Contract, error) {
	root, err := auditRoot(auditDir)
	if err != nil {
		return nil, nil, err
	}
	// What dead runs left is gone before the compile looks at the host; the rest of the
	// clean-up runs beside it.
	gcWait := runner.StartGC(paths.RunRoot().String())
	p, c, err := compile(load, paths.Protected(root)...)
	cleaned, gcErr := gcWait()
	if gcDone != nil {
		gcDone(cleaned, gcErr)
	}
	if err != nil {
		return nil, c, err
	}
	return p, c, nil
}

// placeholder reports whether the file at rel is the empty placeholder a live run in
// this workspace made for a contract that does not exist.
func placeholder(rel string) bool {
	abs, err := filepath.Abs(rel)
	if err != nil {
		return false
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	return runner.Placeholder(paths.RunRoot().String(), abs)
}
