package stage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"github.com/cordonhq/cordon/internal/linux"
)

// ExitFailed is the status of a stage that could not hand over to bwrap; its reason
// is on stderr, for the runner to report.
const ExitFailed = 125

// Main is `internal stage`. It returns only on failure.
func Main(args []string) int {
	runtime.LockOSThread() // the parent-death signal is per thread; exec keeps it
	var sp Spec
	if len(args) != 1 || json.Unmarshal([]byte(args[0]), &sp) != nil || len(sp.Argv) == 0 {
		fmt.Fprintln(os.Stderr, "cordon: internal stage: for cordon's own use only")
		return ExitFailed
	}
	if err := run(&sp); err != nil {
		fmt.Fprintf(os.Stderr, "cordon: staging the sandbox: %v\n", err)
		return ExitFailed
	}
	return ExitFailed // not reached: run execs bwrap
}

func run(sp *Spec) error {
	if os.Getuid() != 0 || sp.UID == 0 {
		return errors.New("stage runs as root and drops to another uid")
	}
	if own, err := linux.OwnMountNamespace(); err != nil || !own {
		return fmt.Errorf("not in a mount namespace of its own (%v): nothing is mounted", err)
	}
	trees, err := cloneAll(sp)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(Root, 0o700); err != nil {
		return err
	}
	if err := linux.MountTmpfs(Root); err != nil {
		return err
	}
	for i, t := range trees {
		target := filepath.Join(Root, strconv.Itoa(i))
		if sp.Sources[i].Dir {
			err = os.Mkdir(target, 0o755)
		} else {
			err = os.WriteFile(target, nil, 0o644)
		}
		if err == nil {
			err = linux.AttachTree(t, target)
		}
		if err != nil {
			return err
		}
		t.Close()
	}
	if err := linux.DropTo(sp.UID, sp.GID); err != nil {
		return err
	}
	return syscall.Exec(sp.Argv[0], sp.Argv, os.Environ())
}

// cloneAll clones every source before anything is mounted over Root, where the run
// directory's own sources live.
func cloneAll(sp *Spec) ([]*os.File, error) {
	srcs := sp.Sources
	trees := make([]*os.File, len(srcs))
	userns := map[Owner]*os.File{}
	defer func() {
		for _, f := range userns {
			f.Close()
		}
	}()
	for i, s := range srcs {
		var ns *os.File
		if s.Idmap != nil && s.In < 0 {
			if ns = userns[*s.Idmap]; ns == nil {
				f, err := linux.IdmapUserns(s.Idmap.UID, sp.UID, s.Idmap.GID, sp.GID)
				if err != nil {
					return nil, err
				}
				userns[*s.Idmap], ns = f, f
			}
		}
		var err error
		if s.In >= 0 && s.In < i {
			rel, rerr := filepath.Rel(srcs[s.In].Path, s.Path)
			if rerr != nil {
				return nil, rerr
			}
			trees[i], err = linux.CloneTree(trees[s.In], rel, nil)
		} else {
			trees[i], err = linux.CloneTree(nil, s.Path, ns)
			if errors.Is(err, linux.ErrNoIdmap) && !s.Writable {
				trees[i], err = linux.CloneTree(nil, s.Path, nil)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return trees, nil
}
